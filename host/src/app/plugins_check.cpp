#include "app/plugins_check.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <stdlib.h>

#include "plugin/plugin_directory.hpp"

namespace outbox::app {
namespace {

namespace fs = std::filesystem;

/// A directory made with mkdtemp, removed with its contents on scope exit.
class ScratchDir {
public:
    ScratchDir() {
        std::error_code ec;
        const fs::path base = fs::temp_directory_path(ec);
        if (ec) return;
        std::string pattern = (base / "outboxd-plugins-check-XXXXXX").string();
        if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    }
    ~ScratchDir() {
        if (path_.empty()) return;
        std::error_code ignored;
        fs::remove_all(path_, ignored);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    [[nodiscard]] const fs::path& path() const noexcept { return path_; }

private:
    fs::path path_;
};

using Row = std::array<std::string, 5>;

std::string join(const std::vector<std::string>& items) {
    std::string text;
    for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
    return text;
}

/// The FILE column already names the file, so the reason's own "<file>: " prefix is dropped.
std::string without_file_prefix(std::string reason, const fs::path& file) {
    const std::string prefix = file.filename().string() + ": ";
    if (reason.rfind(prefix, 0) == 0) reason.erase(0, prefix.size());
    return reason;
}

void print_table(const std::vector<Row>& rows, std::ostream& out) {
    std::array<std::size_t, 5> widths{};
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
    }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            line += row[i];
            if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
        }
        out << line << '\n';
    }
}

}  // namespace

int plugins_check(const std::filesystem::path& dir, const plugin::HandlerConfigs& configs, std::ostream& out,
                  bool config_file_given) {
    const ScratchDir scratch;
    if (scratch.path().empty()) {
        out << "error: cannot create a temporary directory for private plugin copies\n";
        return 1;
    }
    // The same directory model `run` serves from, so the check applies the same trust,
    // file-type and duplicate rules, not only the loader's.
    plugin::PluginDirectory directory(dir, scratch.path(), configs,
                                      plugin::LoaderOptions{.config_optional = !config_file_given});
    const plugin::DirectoryChange result = directory.rescan();

    // A rejection of the directory itself has no file row to go in.
    if (result.added.empty() && result.rejected.size() == 1 && result.rejected.front().file == dir) {
        out << "error: " << result.rejected.front().reason << '\n';
        return 1;
    }
    if (result.added.empty() && result.rejected.empty()) {
        out << "no plugins found in " << dir.string() << '\n';
        return 0;
    }

    std::vector<std::pair<fs::path, Row>> rows;
    for (const auto& plugin : result.added) {
        if (!plugin.handler) {
            rows.emplace_back(plugin.file,
                              Row{plugin.file.filename().string(), plugin.handler_name.empty() ? "-" : plugin.handler_name,
                                  "-", plugin.abi, "OK (needs its config section to construct; check with --config)"});
            continue;
        }
        rows.emplace_back(plugin.file, Row{plugin.file.filename().string(), plugin.handler_name,
                                           join(plugin.event_types), plugin.abi, "OK"});
    }
    for (const auto& rejected : result.rejected) {
        rows.emplace_back(rejected.file, Row{rejected.file.filename().string(), "-", "-", "-",
                                             "error: " + without_file_prefix(rejected.reason, rejected.file)});
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.first.filename() < b.first.filename(); });

    std::vector<Row> table{Row{"FILE", "HANDLER", "EVENT TYPES", "SDK ABI", "RESULT"}};
    for (auto& [file, row] : rows) table.push_back(std::move(row));
    print_table(table, out);
    return result.rejected.empty() ? 0 : 1;
}

}  // namespace outbox::app
