#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "outbox/sdk/handler.hpp"

namespace outbox::plugin {

/// A handler plugin that passed every check and was constructed.
struct LoadedPlugin {
    std::filesystem::path file;  // the file in the plugin directory (not the private copy)
    std::string handler_name;
    std::vector<std::string> event_types;
    std::string abi;  // e.g. "1.0 (sdk 1.0.0, libstdc++/cxx11)"
    /// The handler. Its deleter destroys the object and then unloads the library, so the
    /// code stays mapped exactly as long as anything holds this pointer (reference-counted
    /// unloading). Null only with LoaderOptions::config_optional, for a plugin that could
    /// not be constructed without its config section (event_types is then empty).
    std::shared_ptr<sdk::Handler> handler;
    /// SHA-256 (lower-case hex) of the file's bytes as loaded: which build this is, whatever
    /// its name, so hosts running different builds of one handler can be told apart.
    std::string sha256{};
};

/// A plugin file that was refused; `reason` is one sentence (no plugin what() text).
struct RejectedPlugin {
    std::filesystem::path file;
    std::string reason;
};

using LoadResult = std::variant<LoadedPlugin, RejectedPlugin>;

/// handler_name -> that handler's `config` section as JSON text.
using HandlerConfigs = std::map<std::string, std::string>;

struct LoaderOptions {
    /// For `plugins check` without a config file: a constructor that throws while the
    /// plugin has no config section leaves it unconstructed instead of rejected, since a
    /// handler that needs its configuration is not a broken plugin.
    bool config_optional = false;
};

/// Loads plugin files with Boost.DLL. Never throws for a bad file: every problem becomes a
/// RejectedPlugin. Each file is first copied into `private_dir` and loaded from the copy
/// (rtld_now), so a file overwritten in place cannot crash the host. The loader judges
/// only what a file is; whether its owner and mode may be trusted is PluginDirectory's
/// decision, made on the descriptor it then hands to load_open_file().
class PluginLoader {
public:
    explicit PluginLoader(std::filesystem::path private_dir, LoaderOptions options = {});

    /// Reads the manifest, checks the ABI, resolves the factory and constructs the handler
    /// exactly once with its config section ("{}" when there is none): the section named
    /// by the manifest's handler name, or, when the manifest has none (one-argument
    /// OUTBOX_PLUGIN, SDK 1.0), the section named like the file ("name.so"/"libname.so").
    /// handler_name() must then equal that name.
    /// Opens `file` (following symbolic links) and loads it as load_open_file() does.
    LoadResult load_file(const std::filesystem::path& file, const HandlerConfigs& configs);

    /// Loads the file open on `fd` (borrowed, read from offset 0; never re-opened by path),
    /// so the bytes loaded are those of the file the caller checked. `file` names it in
    /// results and messages.
    LoadResult load_open_file(const std::filesystem::path& file, int fd, const HandlerConfigs& configs);

private:
    std::filesystem::path private_dir_;
    LoaderOptions options_;
    unsigned long long copies_ = 0;
};

}  // namespace outbox::plugin
