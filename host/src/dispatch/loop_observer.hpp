#pragma once

#include <chrono>
#include <optional>

namespace outbox::dispatch {

/// Told on every pass of the scheduler's claim/dispatch loop, so a supervisor's watchdog
/// (systemd's WATCHDOG=1) follows that loop itself: when the loop is wedged, the beats stop.
/// Implementations are called from the scheduler thread and must not block.
class LoopObserver {
public:
    virtual ~LoopObserver() = default;
    /// One pass of the loop began.
    virtual void loop_iterated() noexcept = 0;
    /// The longest the loop may wait idle between two passes; nullopt when anything goes
    /// (outbox.poll_interval alone then decides).
    [[nodiscard]] virtual std::optional<std::chrono::milliseconds> max_idle_wait() const noexcept = 0;
};

}  // namespace outbox::dispatch
