#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "db/db_error.hpp"

namespace outbox::db {

/// One per host: logs one line when the database becomes unreachable (naming the component
/// that noticed) and one when it is back, however many attempts fail in between. Thread-safe.
class OutageLog {
public:
    void failed(const std::string& component, const DbFailure& failure);
    /// `connected_at`: when the connection that just worked was opened. One opened before
    /// the outage began proves nothing (a server shutting down still answers on some
    /// connections for a moment), so only a newer one ends the outage.
    void succeeded(std::chrono::steady_clock::time_point connected_at = std::chrono::steady_clock::now());
    /// How many outages have ended so far.
    [[nodiscard]] std::uint64_t recoveries() {
        std::lock_guard lock(mutex_);
        return recoveries_;
    }
    /// The database is known to be unreachable right now.
    [[nodiscard]] bool down() {
        std::lock_guard lock(mutex_);
        return down_;
    }

private:
    std::mutex mutex_;
    bool down_ = false;
    std::uint64_t recoveries_ = 0;
    std::chrono::steady_clock::time_point since_{};
};

/// Delays between reconnect attempts: 100ms doubling to 5s.
class ReconnectBackoff {
public:
    std::chrono::milliseconds next() noexcept {
        const auto current = delay_;
        delay_ = std::min(delay_ * 2, std::chrono::milliseconds{5000});
        return current;
    }
    void reset() noexcept { delay_ = std::chrono::milliseconds{100}; }

private:
    std::chrono::milliseconds delay_{100};
};

}  // namespace outbox::db
