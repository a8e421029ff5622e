#include "support/plugin_dir.hpp"

namespace outbox::test {

namespace fs = std::filesystem;

fs::path make_plugin_dir(const fs::path& parent) {
    const fs::path plugins = parent / "plugins";
    fs::create_directory(plugins);
    return plugins;
}

fs::path scripted_plugin_dir(const fs::path& parent) {
    const fs::path plugins = make_plugin_dir(parent);
    fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins / "libscripted.so");
    return plugins;
}

void deploy_plugin(const fs::path& from, const fs::path& to) {
    const fs::path staging = to.parent_path() / (".staging-" + to.filename().string());
    fs::copy_file(from, staging, fs::copy_options::overwrite_existing);
    fs::permissions(staging, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
    fs::rename(staging, to);
}

}  // namespace outbox::test
