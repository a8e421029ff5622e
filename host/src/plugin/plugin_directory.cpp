#include "plugin/plugin_directory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

#include <sys/stat.h>
#include <unistd.h>

namespace outbox::plugin {
namespace fs = std::filesystem;

std::optional<std::string> trust_problem(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT) return path.string() + " does not exist";
        return path.string() + " cannot be read (" + std::strerror(errno) + ")";
    }
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
        return path.string() + " is owned by uid " + std::to_string(st.st_uid) +
               ", neither root nor the user outboxd runs as; a plugin runs with the host's database credentials";
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return path.string() + " is writable by " + ((st.st_mode & S_IWOTH) != 0 ? "others" : "its group") +
               "; make it writable by its owner only (chmod go-w)";
    }
    return std::nullopt;
}

PluginDirectory::PluginDirectory(fs::path dir, fs::path private_dir, HandlerConfigs configs)
    : dir_(std::move(dir)), configs_(std::move(configs)), loader_(std::move(private_dir)) {}

DirectoryChange PluginDirectory::rescan() {
    DirectoryChange change;
    std::optional<std::string> directory_problem = trust_problem(dir_);
    std::vector<fs::path> entries;
    if (!directory_problem) {
        // A directory that cannot be listed (no read permission, not a directory) would
        // otherwise look empty and unload nothing without a word.
        std::error_code ec;
        for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(it->path());
        if (ec) directory_problem = dir_.string() + " cannot be listed (" + ec.message() + ")";
    }
    if (directory_problem) {
        // Report a directory problem once, not on every rescan; what is loaded stays.
        if (directory_problem != last_directory_problem_) change.rejected.push_back({dir_, *directory_problem});
        last_directory_problem_ = directory_problem;
        return change;
    }
    last_directory_problem_.reset();

    std::map<fs::path, Version> present;
    std::map<fs::path, std::string> unusable;
    for (const fs::path& path : entries) {
        if (path.extension() != ".so") continue;
        struct stat st {};
        if (::stat(path.c_str(), &st) != 0) {
            unusable[path.filename()] = "cannot be read (a dangling symbolic link?)";
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            unusable[path.filename()] = "is not a regular file";
            continue;
        }
        present[path.filename()] =
            Version{st.st_ino, static_cast<std::uintmax_t>(st.st_size),
                    static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec};
    }

    // Entries named *.so that are not files: reported once each, until they change.
    for (const auto& [name, problem] : unusable) {
        const auto known = unusable_.find(name);
        if (known == unusable_.end() || known->second != problem) {
            change.rejected.push_back({dir_ / name, name.string() + ": " + problem});
        }
    }
    unusable_ = std::move(unusable);

    // Files that are gone: their handlers stop being routed to.
    for (auto it = files_.begin(); it != files_.end();) {
        if (present.contains(it->first)) {
            ++it;
            continue;
        }
        if (it->second.plugin) {
            change.removed.push_back(it->second.plugin->handler_name);
            retired_.push_back(std::move(*it->second.plugin));
        }
        it = files_.erase(it);
    }

    if (!change.removed.empty()) {
        // A file refused as a duplicate may be the only provider now: look at it again.
        for (auto& [name, entry] : files_) {
            if (!entry.plugin) entry.version = Version{};
        }
    }

    for (const auto& [name, version] : present) {
        const auto known = files_.find(name);
        if (known != files_.end() && known->second.version == version) continue;
        const fs::path file = dir_ / name;
        Entry next{version, std::nullopt};
        if (auto problem = trust_problem(file)) {
            change.rejected.push_back({file, *problem});
        } else {
            LoadResult result = loader_.load_file(file, configs_);
            if (auto* rejected = std::get_if<RejectedPlugin>(&result)) {
                change.rejected.push_back(std::move(*rejected));
            } else {
                auto& loaded = std::get<LoadedPlugin>(result);
                const auto owner = std::find_if(files_.begin(), files_.end(), [&](const auto& other) {
                    return other.first != name && other.second.plugin && other.second.plugin->handler_name == loaded.handler_name;
                });
                if (owner != files_.end()) {
                    change.rejected.push_back(
                        {file, name.string() + ": duplicate handler_name '" + loaded.handler_name +
                                   "', already provided by " + (dir_ / owner->first).string() +
                                   "; remove one of the two files"});
                    retired_.push_back(std::move(loaded));  // constructed once; never unloaded
                } else {
                    next.plugin = std::move(loaded);
                }
            }
        }
        if (known == files_.end()) {
            if (next.plugin) change.added.push_back(*next.plugin);
            files_.emplace(name, std::move(next));
            continue;
        }
        Entry& entry = known->second;
        if (!next.plugin) {
            // A bad new version: the running one keeps serving; remember the bad version
            // so it is reported once, not on every rescan.
            entry.version = version;
            continue;
        }
        if (entry.plugin) {
            if (entry.plugin->handler_name == next.plugin->handler_name) {
                change.replaced.push_back(*next.plugin);
            } else {
                change.removed.push_back(entry.plugin->handler_name);
                change.added.push_back(*next.plugin);
            }
            retired_.push_back(std::move(*entry.plugin));
        } else {
            change.added.push_back(*next.plugin);
        }
        entry = std::move(next);
    }
    return change;
}

std::vector<LoadedPlugin> PluginDirectory::current() const {
    std::vector<LoadedPlugin> plugins;
    for (const auto& [name, entry] : files_) {
        if (entry.plugin) plugins.push_back(*entry.plugin);
    }
    return plugins;
}

}  // namespace outbox::plugin
