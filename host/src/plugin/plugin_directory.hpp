#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "plugin/plugin_loader.hpp"

namespace outbox::plugin {

/// What one rescan changed.
struct DirectoryChange {
    std::vector<LoadedPlugin> added;       // new handler names
    std::vector<LoadedPlugin> replaced;    // a new version of a loaded handler, same file name
    std::vector<std::string> removed;      // handler names no longer provided
    std::vector<RejectedPlugin> rejected;  // files refused by this rescan (each reported once per version)

    [[nodiscard]] bool routing_changed() const { return !added.empty() || !replaced.empty() || !removed.empty(); }
};

/// The plugin directory as the host serves it: which file provides which handler, kept in
/// step with the directory by rescan(). Not thread-safe: one owner calls rescan().
/// Versions, trust checks and unloading: docs/design.md, "The plugin directory".
class PluginDirectory {
public:
    PluginDirectory(std::filesystem::path dir, std::filesystem::path private_dir, HandlerConfigs configs,
                    LoaderOptions options = {});

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
    static Version version_of(const struct stat& st) noexcept {
        return Version{st.st_ino, static_cast<std::uintmax_t>(st.st_size),
                       static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec};
    }
    struct Entry {
        Version version;
        std::optional<LoadedPlugin> plugin;  // empty when this version was rejected
    };

    /// The *.so entries of one listing: regular files by version, the rest with the reason
    /// they cannot be plugins.
    struct Listing {
        std::map<std::filesystem::path, Version> present;
        std::map<std::filesystem::path, std::string> unusable;
    };
    /// One new version of a file, judged: the entry to keep, and its rejection if it has one.
    struct Judged {
        Entry next;
        std::optional<RejectedPlugin> rejected;
    };

    /// Opens dir_ into `dir_fd` after the trust checks and lists it into `names`; the
    /// problem, when there is one, is the directory's single rejection.
    std::optional<std::string> open_directory(int& dir_fd, std::vector<std::string>& names) const;
    // The steps of rescan(), in order.
    static Listing list_entries(int dir_fd, const std::vector<std::string>& names);
    void report_unusable(std::map<std::filesystem::path, std::string> unusable, DirectoryChange& change);
    void drop_gone(const std::map<std::filesystem::path, Version>& present, DirectoryChange& change);
    std::optional<Judged> judge(int dir_fd, const std::filesystem::path& name, const Version& listed);
    void publish(const std::filesystem::path& name, Entry next, DirectoryChange& change);

    std::filesystem::path dir_;
    HandlerConfigs configs_;
    PluginLoader loader_;
    std::map<std::filesystem::path, Entry> files_;  // by file name
    std::map<std::filesystem::path, std::string> unusable_;  // *.so entries that are not files
    std::optional<std::string> last_directory_problem_;
};

}  // namespace outbox::plugin
