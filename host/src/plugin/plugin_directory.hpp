#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plugin/plugin_loader.hpp"

namespace outbox::plugin {

/// Why `path` (the plugin directory or a plugin file) must not be trusted, or nullopt when
/// it may be: a plugin runs with the host's database credentials, so only root or the user
/// the host runs as may own it, and neither group nor others may write to it.
std::optional<std::string> trust_problem(const std::filesystem::path& path);

/// What one rescan changed.
struct DirectoryChange {
    std::vector<LoadedPlugin> added;       // new handler names
    std::vector<LoadedPlugin> replaced;    // a new version of a loaded handler, same file name
    std::vector<std::string> removed;      // handler names no longer provided
    std::vector<RejectedPlugin> rejected;  // files refused by this rescan (each reported once per version)

    [[nodiscard]] bool routing_changed() const { return !added.empty() || !replaced.empty() || !removed.empty(); }
};

/// The plugin directory as the host serves it: which file provides which handler, kept in
/// step with the directory by rescan(). A file is (re)loaded when it appears or its
/// identity (inode, size, modification time) changes, so the documented deploy step —
/// write the file elsewhere in the same file system, then rename it into place — is seen
/// as one new version. A file that fails to load, or that brings a handler_name another
/// present file already provides, is rejected and the version already serving stays.
///
/// Plugins that were replaced or removed are retired, not unloaded: events already claimed
/// finish with the old handler, and the code stays mapped until the process exits, so
/// nothing depends on dlclose being safe. Not thread-safe: one owner calls rescan().
class PluginDirectory {
public:
    PluginDirectory(std::filesystem::path dir, std::filesystem::path private_dir, HandlerConfigs configs);

    /// Brings the loaded set in step with the directory. Never throws for bad files; a
    /// directory that is missing or untrusted is one rejection and changes nothing loaded.
    DirectoryChange rescan();

    /// The plugins serving now, in file-name order.
    [[nodiscard]] std::vector<LoadedPlugin> current() const;
    [[nodiscard]] const std::filesystem::path& dir() const noexcept { return dir_; }

private:
    struct Version {
        std::uintmax_t inode = 0;
        std::uintmax_t size = 0;
        long long mtime_ns = 0;
        bool operator==(const Version&) const = default;
    };
    struct Entry {
        Version version;
        std::optional<LoadedPlugin> plugin;  // empty when this version was rejected
    };

    std::filesystem::path dir_;
    HandlerConfigs configs_;
    PluginLoader loader_;
    std::map<std::filesystem::path, Entry> files_;  // by file name
    std::map<std::filesystem::path, std::string> unusable_;  // *.so entries that are not files
    std::vector<LoadedPlugin> retired_;
    std::optional<std::string> last_directory_problem_;
};

}  // namespace outbox::plugin
