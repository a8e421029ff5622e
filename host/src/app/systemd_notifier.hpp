#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

#include "dispatch/loop_observer.hpp"

namespace outbox::app {

/// Tells systemd (sd_notify, Type=notify) how outboxd is doing: READY=1, STATUS=,
/// RELOADING=1, STOPPING=1, and WATCHDOG=1 from the scheduler's loop (it is the runtime's
/// LoopObserver). Every call is a no-op when NOTIFY_SOCKET is unset; watchdog beats only
/// when WATCHDOG_USEC is set for this process, and only between READY=1 and STOPPING=1
/// (systemd enforces the watchdog in that span only).
class SystemdNotifier final : public dispatch::LoopObserver {
public:
    SystemdNotifier();

    /// NOTIFY_SOCKET is set: systemd (or another supervisor) listens.
    [[nodiscard]] bool enabled() const noexcept { return enabled_; }

    /// READY=1, with a STATUS= line in the same message when `status` is not empty.
    void ready(const std::string& status = {});
    void reloading();
    void stopping();
    /// One line; never payloads or secrets.
    void status(const std::string& line);
    /// WATCHDOG=1 now, unless one was sent within a quarter of the watchdog interval.
    void beat() noexcept;

    void loop_iterated() noexcept override { beat(); }
    /// A quarter of WATCHDOG_USEC: two idle passes fit in half the interval.
    [[nodiscard]] std::optional<std::chrono::milliseconds> max_idle_wait() const noexcept override;
    /// WATCHDOG_USEC for this process, if set.
    [[nodiscard]] std::optional<std::chrono::microseconds> watchdog_interval() const noexcept { return watchdog_; }

private:
    bool enabled_ = false;
    std::optional<std::chrono::microseconds> watchdog_;
    std::atomic<bool> beating_{false};
    std::atomic<std::chrono::steady_clock::rep> last_beat_{0};
};

}  // namespace outbox::app
