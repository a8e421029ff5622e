#include "plugin/plugin_directory.hpp"

#include "plugin/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace outbox::plugin {
namespace fs = std::filesystem;
namespace {


constexpr std::string_view kSymlinkRefused =
    "is a symbolic link, and symbolic links are refused; copy the file into the plugin directory under a "
    "temporary name and rename it into place";

/// Why `st` (the plugin directory or a plugin file, as fstat saw the open descriptor) must
/// not be trusted: a plugin runs with the host's database credentials, so only root or the
/// user the host runs as may own it, and neither group nor others may write to it.
std::optional<std::string> trust_problem(const fs::path& path, const struct stat& st) {
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

/// Why `parent`, a directory above the plugin directory, must not be trusted: whoever may
/// rename its entries can swap the plugin directory itself. A sticky directory (/tmp)
/// only lets an entry's owner rename it, so it may be writable by others.
std::optional<std::string> parent_problem(const fs::path& dir, const fs::path& parent, const struct stat& st) {
    const std::string prefix = dir.string() + " is not trusted: its parent directory " + parent.string();
    if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
        return prefix + " is owned by uid " + std::to_string(st.st_uid) + ", neither root nor the user outboxd runs as";
    }
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
        return prefix + " is writable by " + ((st.st_mode & S_IWOTH) != 0 ? "others" : "its group") +
               "; make it writable by its owner only (chmod go-w) or set its sticky bit";
    }
    return std::nullopt;
}

/// Checks every directory above the open plugin directory `dir_fd` up to /: the physical
/// parents, reached through ".." from the descriptor itself, and the directories named on
/// the configured path, which also hold any symbolic link the path goes through.
std::optional<std::string> parents_problem(const fs::path& dir, int dir_fd) {
    std::error_code ec;
    fs::path lexical = fs::absolute(dir, ec).lexically_normal();
    if (ec) return dir.string() + " cannot be checked (" + ec.message() + ")";
    if (!lexical.has_filename()) lexical = lexical.parent_path();  // a trailing slash
    std::set<std::pair<dev_t, ino_t>> checked;

    // Named after the canonical path; the descriptor walk is what is judged.
    fs::path name = fs::canonical(dir, ec);
    if (ec) name = lexical;
    struct stat current {};
    if (::fstat(dir_fd, &current) != 0) return dir.string() + " cannot be checked (" + errno_text(errno) + ")";
    int current_fd = dir_fd;
    std::optional<UniqueFd> held;
    for (;;) {
        // O_PATH: a parent the host may search but not read (0711) can still be judged.
        UniqueFd parent(::openat(current_fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
        struct stat st {};
        if (parent.get() < 0 || ::fstat(parent.get(), &st) != 0) {
            const int error = errno;
            return dir.string() + " cannot be checked: the parent of " + name.string() + " cannot be opened (" +
                   errno_text(error) + ")";
        }
        if (st.st_dev == current.st_dev && st.st_ino == current.st_ino) break;  // the root
        name = name.has_relative_path() ? name.parent_path() : name;
        if (auto problem = parent_problem(dir, name, st)) return problem;
        checked.emplace(st.st_dev, st.st_ino);
        current = st;
        current_fd = ::dup(parent.get());
        if (current_fd < 0) return dir.string() + " cannot be checked (" + errno_text(errno) + ")";
        held.emplace(current_fd);
    }

    for (fs::path parent = lexical.parent_path();; parent = parent.parent_path()) {
        struct stat st {};
        if (::stat(parent.c_str(), &st) != 0) {
            const int error = errno;
            return dir.string() + " cannot be checked: its parent directory " + parent.string() + " cannot be read (" +
                   errno_text(error) + ")";
        }
        if (checked.emplace(st.st_dev, st.st_ino).second) {
            if (auto problem = parent_problem(dir, parent, st)) return problem;
        }
        if (!parent.has_relative_path()) break;
    }
    return std::nullopt;
}

}  // namespace

PluginDirectory::PluginDirectory(fs::path dir, fs::path private_dir, HandlerConfigs configs, LoaderOptions options)
    : dir_(std::move(dir)), configs_(std::move(configs)), loader_(std::move(private_dir), options) {}

std::optional<std::string> PluginDirectory::open_directory(int& dir_fd, std::vector<std::string>& names) const {
    // O_NOFOLLOW: a symbolic link here would let whoever owns the link choose the directory.
    dir_fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
        const int error = errno;
        if (error == ENOENT) return dir_.string() + " does not exist";
        struct stat link {};
        // With O_DIRECTORY a link is reported as ENOTDIR rather than ELOOP.
        if ((error == ELOOP || error == ENOTDIR) && ::lstat(dir_.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
            return dir_.string() + " is a symbolic link; set plugins.dir to the directory it points to";
        }
        // A directory that cannot be listed (no read permission, not a directory) would
        // otherwise look empty and unload nothing without a word.
        return dir_.string() + " cannot be listed (" + errno_text(error) + ")";
    }
    struct stat st {};
    if (::fstat(dir_fd, &st) != 0) return dir_.string() + " cannot be listed (" + errno_text(errno) + ")";
    if (auto problem = trust_problem(dir_, st)) return problem;
    if (auto problem = parents_problem(dir_, dir_fd)) return problem;

    const int listing_fd = ::dup(dir_fd);
    DIR* listing = listing_fd < 0 ? nullptr : ::fdopendir(listing_fd);
    if (listing == nullptr) {
        const int error = errno;
        if (listing_fd >= 0) ::close(listing_fd);
        return dir_.string() + " cannot be listed (" + errno_text(error) + ")";
    }
    errno = 0;
    while (const dirent* entry = ::readdir(listing)) {
        const std::string name = entry->d_name;
        if (name != "." && name != "..") names.push_back(name);
        errno = 0;
    }
    const int error = errno;
    ::closedir(listing);
    if (error != 0) return dir_.string() + " cannot be listed (" + errno_text(error) + ")";
    return std::nullopt;
}

DirectoryChange PluginDirectory::rescan() {
    DirectoryChange change;
    int raw_fd = -1;
    std::vector<std::string> entries;
    std::optional<std::string> directory_problem = open_directory(raw_fd, entries);
    const UniqueFd dir_fd(raw_fd);
    if (directory_problem) {
        // Report a directory problem once, not on every rescan; what is loaded stays.
        if (directory_problem != last_directory_problem_) change.rejected.push_back({dir_, *directory_problem});
        last_directory_problem_ = directory_problem;
        return change;
    }
    last_directory_problem_.reset();

    Listing listing = list_entries(dir_fd.get(), entries);
    report_unusable(std::move(listing.unusable), change);
    drop_gone(listing.present, change);
    for (const auto& [name, version] : listing.present) {
        const auto known = files_.find(name);
        if (known != files_.end() && known->second.version == version) continue;
        std::optional<Judged> judged = judge(dir_fd.get(), name, version);
        if (!judged) continue;  // removed since the listing: seen next rescan
        if (judged->rejected) change.rejected.push_back(std::move(*judged->rejected));
        publish(name, std::move(judged->next), change);
    }
    std::stable_sort(change.rejected.begin(), change.rejected.end(),
                     [](const RejectedPlugin& a, const RejectedPlugin& b) { return a.file < b.file; });
    return change;
}

PluginDirectory::Listing PluginDirectory::list_entries(int dir_fd, const std::vector<std::string>& names) {
    Listing listing;
    for (const std::string& entry : names) {
        const fs::path name(entry);
        if (name.extension() != ".so") continue;
        struct stat st {};
        if (::fstatat(dir_fd, entry.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT) listing.unusable[name] = "cannot be read (" + errno_text(errno) + ")";
            continue;  // ENOENT: removed since the listing
        }
        if (S_ISLNK(st.st_mode)) {
            listing.unusable[name] = kSymlinkRefused;
            continue;
        }
        if (!S_ISREG(st.st_mode)) {
            listing.unusable[name] = "is not a regular file";
            continue;
        }
        listing.present[name] = version_of(st);
    }
    return listing;
}

/// Entries named *.so that are not files: reported once each, until they change.
void PluginDirectory::report_unusable(std::map<fs::path, std::string> unusable, DirectoryChange& change) {
    for (const auto& [name, problem] : unusable) {
        const auto known = unusable_.find(name);
        if (known == unusable_.end() || known->second != problem) {
            change.rejected.push_back({dir_ / name, name.string() + ": " + problem});
        }
    }
    unusable_ = std::move(unusable);
}

/// Files that are gone: their handlers stop being routed to. A name that is now a symbolic
/// link or other refused entry is a bad new version: the loaded one keeps serving.
void PluginDirectory::drop_gone(const std::map<fs::path, Version>& present, DirectoryChange& change) {
    for (auto it = files_.begin(); it != files_.end();) {
        if (present.contains(it->first) || unusable_.contains(it->first)) {
            ++it;
            continue;
        }
        if (it->second.plugin) {
            change.removed.push_back(it->second.plugin->handler_name);
        }
        it = files_.erase(it);
    }

    if (!change.removed.empty()) {
        // A file refused as a duplicate may be the only provider now: look at it again.
        for (auto& [name, entry] : files_) {
            if (!entry.plugin) entry.version = Version{};
        }
    }
}

/// Opens, checks and loads one new version of `name`; nullopt when the file was removed
/// since the listing.
std::optional<PluginDirectory::Judged> PluginDirectory::judge(int dir_fd, const fs::path& name, const Version& listed) {
    const fs::path file = dir_ / name;
    Judged judged{Entry{listed, std::nullopt}, std::nullopt};
    // Owner and mode are judged on the descriptor that is then copied and loaded, so a
    // file renamed over the name after the check is never the one loaded.
    const UniqueFd fd(::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    const int open_error = errno;
    if (fd.get() < 0 && open_error == ENOENT) return std::nullopt;
    struct stat st {};
    std::optional<std::string> problem;
    if (fd.get() < 0) {
        problem = name.string() + ": " + (open_error == ELOOP ? std::string(kSymlinkRefused)
                                                              : "cannot be opened (" + errno_text(open_error) + ")");
    } else if (::fstat(fd.get(), &st) != 0) {
        problem = name.string() + ": cannot be read (" + errno_text(errno) + ")";
    } else if (!S_ISREG(st.st_mode)) {
        problem = name.string() + ": is not a regular file";
    } else {
        // What was opened is the version being judged, even if the name changed since.
        judged.next.version = version_of(st);
        problem = trust_problem(file, st);
    }
    if (problem) {
        judged.rejected = RejectedPlugin{file, *problem};
        return judged;
    }

    LoadResult result = loader_.load_open_file(file, fd.get(), configs_);
    if (auto* rejected = std::get_if<RejectedPlugin>(&result)) {
        judged.rejected = std::move(*rejected);
        return judged;
    }
    auto& loaded = std::get<LoadedPlugin>(result);
    const auto owner = std::find_if(files_.begin(), files_.end(), [&](const auto& other) {
        return other.first != name && other.second.plugin && !loaded.handler_name.empty() &&
               other.second.plugin->handler_name == loaded.handler_name;
    });
    if (owner != files_.end()) {
        judged.rejected = RejectedPlugin{file, name.string() + ": duplicate handler_name '" + loaded.handler_name +
                                                   "', already provided by " + (dir_ / owner->first).string() +
                                                   "; remove one of the two files"};
    } else {
        judged.next.plugin = std::move(loaded);
    }
    return judged;
}

/// Puts a judged version in place and records what that changes for routing.
void PluginDirectory::publish(const fs::path& name, Entry next, DirectoryChange& change) {
    const auto known = files_.find(name);
    if (known == files_.end()) {
        if (next.plugin) change.added.push_back(*next.plugin);
        files_.emplace(name, std::move(next));
        return;
    }
    Entry& entry = known->second;
    if (!next.plugin) {
        // A bad new version: the running one keeps serving; remember the bad version
        // so it is reported once, not on every rescan.
        entry.version = next.version;
        return;
    }
    if (entry.plugin) {
        if (entry.plugin->handler_name == next.plugin->handler_name) {
            change.replaced.push_back(*next.plugin);
        } else {
            change.removed.push_back(entry.plugin->handler_name);
            change.added.push_back(*next.plugin);
        }
    } else {
        change.added.push_back(*next.plugin);
    }
    entry = std::move(next);
}

std::vector<LoadedPlugin> PluginDirectory::current() const {
    std::vector<LoadedPlugin> plugins;
    for (const auto& [name, entry] : files_) {
        if (entry.plugin) plugins.push_back(*entry.plugin);
    }
    return plugins;
}

}  // namespace outbox::plugin
