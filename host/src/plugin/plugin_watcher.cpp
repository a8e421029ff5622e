#include "plugin/plugin_watcher.hpp"

#include <array>
#include <memory>
#include <utility>

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

namespace outbox::plugin {
namespace {
constexpr auto kDebounce = std::chrono::milliseconds{200};
constexpr auto kTick = std::chrono::milliseconds{100};

class Inotify {
public:
    explicit Inotify(const std::filesystem::path& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
        if (fd_ >= 0) {
            watch_ = ::inotify_add_watch(fd_, dir.c_str(),
                                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CREATE |
                                             IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
        }
    }
    ~Inotify() {
        if (fd_ >= 0) ::close(fd_);
    }
    Inotify(const Inotify&) = delete;
    Inotify& operator=(const Inotify&) = delete;

    [[nodiscard]] bool watching() const noexcept { return fd_ >= 0 && watch_ >= 0; }
    /// Waits up to `timeout` for events; true if any arrived (and drains them).
    bool wait(std::chrono::milliseconds timeout) {
        pollfd pfd{fd_, POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(timeout.count())) <= 0) return false;
        std::array<char, 4096> buffer{};
        bool any = false;
        while (::read(fd_, buffer.data(), buffer.size()) > 0) any = true;
        return any;
    }

private:
    int fd_ = -1;
    int watch_ = -1;
};
}  // namespace

void PluginWatcher::trigger() {
    {
        std::lock_guard lock(mutex_);
        triggered_ = true;
    }
    triggered_cv_.notify_all();
}

void PluginWatcher::run(std::stop_token stop) {
    auto next_rescan = std::chrono::steady_clock::now() + rescan_interval_;
    std::unique_ptr<Inotify> inotify;
    while (!stop.stop_requested()) {
        // Re-arm when the directory appears or was replaced.
        if (!inotify || !inotify->watching()) inotify = std::make_unique<Inotify>(dir_);
        bool changed = false;
        if (inotify->watching()) {
            if (inotify->wait(kTick)) {
                // Let a burst (copy, then rename) settle into one rescan.
                while (inotify->wait(kDebounce)) {
                }
                changed = true;
            }
        } else {
            std::unique_lock lock(mutex_);
            triggered_cv_.wait_for(lock, stop, kTick, [&] { return triggered_; });
        }
        {
            std::lock_guard lock(mutex_);
            changed = changed || std::exchange(triggered_, false);
        }
        if (std::chrono::steady_clock::now() >= next_rescan) changed = true;
        if (changed && !stop.stop_requested()) {
            next_rescan = std::chrono::steady_clock::now() + rescan_interval_;
            on_change_();
        }
    }
}

}  // namespace outbox::plugin
