#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <stop_token>

namespace outbox::plugin {

/// Calls `on_change` when the plugin directory may have changed: on inotify events
/// (debounced, so a copy followed by a rename is one call), every `rescan_interval` as a
/// fallback (network file systems, a directory created after start), and on trigger()
/// (SIGHUP). `on_change` runs on the watcher's thread.
class PluginWatcher {
public:
    PluginWatcher(std::filesystem::path dir, std::chrono::milliseconds rescan_interval, std::function<void()> on_change)
        : dir_(std::move(dir)), rescan_interval_(rescan_interval), on_change_(std::move(on_change)) {}

    void run(std::stop_token stop);
    void trigger();

private:
    std::filesystem::path dir_;
    std::chrono::milliseconds rescan_interval_;
    std::function<void()> on_change_;
    std::mutex mutex_;
    std::condition_variable_any triggered_cv_;
    bool triggered_ = false;
};

}  // namespace outbox::plugin
