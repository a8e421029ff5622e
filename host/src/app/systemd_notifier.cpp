#include "app/systemd_notifier.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include <systemd/sd-daemon.h>

namespace outbox::app {

SystemdNotifier::SystemdNotifier() : enabled_(std::getenv("NOTIFY_SOCKET") != nullptr) {
    // sd_watchdog_enabled also checks WATCHDOG_PID, when set, against this process.
    std::uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) watchdog_ = std::chrono::microseconds{usec};
}

void SystemdNotifier::ready(const std::string& status) {
    sd_notify(0, status.empty() ? "READY=1" : ("READY=1\nSTATUS=" + status).c_str());
    // No beat here: ready() also follows a SIGHUP rescan on another thread, and a beat from
    // anywhere but the dispatch loop would keep a wedged host alive.
    beating_ = true;
}

void SystemdNotifier::reloading() { sd_notify(0, "RELOADING=1"); }

void SystemdNotifier::stopping() {
    beating_ = false;
    sd_notify(0, "STOPPING=1");
}

void SystemdNotifier::status(const std::string& line) { sd_notify(0, ("STATUS=" + line).c_str()); }

void SystemdNotifier::beat() noexcept {
    if (!watchdog_ || !beating_) return;
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    auto last = last_beat_.load();
    const auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(*watchdog_ / 4).count();
    if (last != 0 && now - last < gap) return;
    if (!last_beat_.compare_exchange_strong(last, now)) return;  // another thread just beat
    sd_notify(0, "WATCHDOG=1");
}

std::optional<std::chrono::milliseconds> SystemdNotifier::max_idle_wait() const noexcept {
    if (!watchdog_) return std::nullopt;
    return std::max(std::chrono::milliseconds{1}, std::chrono::duration_cast<std::chrono::milliseconds>(*watchdog_ / 4));
}

}  // namespace outbox::app
