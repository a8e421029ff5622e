#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection>

namespace outbox::routing {

/// The NOTIFY channel pause and resume signal on commit; every host then re-reads
/// outbox_handler_pause (the payload, the handler name, is informational).
inline constexpr const char* kHandlerNotifyChannel = "outboxd_handlers";

/// The pause actor of an open circuit breaker; every other paused_by is an operator's pause,
/// which the breaker never resumes.
inline constexpr const char* kCircuitBreakerActor = "circuit-breaker";

struct PausedHandler {
    std::string handler;
    std::string paused_at;  // RFC 3339, UTC
    std::string paused_by;
    /// An open circuit breaker's pause (paused_by = kCircuitBreakerActor): when its next probe
    /// may start (RFC 3339, UTC), and the host running a probe now (empty: none).
    std::string next_probe_at;
    std::string probe_host;
    [[nodiscard]] bool circuit_open() const { return paused_by == kCircuitBreakerActor; }
};

std::vector<PausedHandler> read_paused_handlers(pqxx::connection& conn);

/// The handlers paused fleet-wide as this host last read them. The scheduler re-reads them
/// when the listener marks the snapshot stale (NOTIFY, reconnect) and at every poll
/// interval; until the first read it claims nothing. Thread-safe.
class PausedHandlers {
public:
    /// `names`: every paused handler; `by_breaker`: those of them an open circuit breaker paused.
    void set(std::set<std::string> names, std::set<std::string> by_breaker = {});
    /// The breaker this host just opened, before the next read confirms it: no call of
    /// this host starts in between.
    void add_by_breaker(const std::string& name);
    [[nodiscard]] bool contains(const std::string& name) const;
    [[nodiscard]] std::set<std::string> get() const;
    /// The handlers paused by an open circuit breaker.
    [[nodiscard]] std::set<std::string> by_breaker() const;
    [[nodiscard]] bool loaded() const noexcept { return loaded_; }

    void mark_stale() noexcept { stale_ = true; }
    /// Clears the flag and returns whether it was set.
    bool take_stale() noexcept { return stale_.exchange(false); }

private:
    mutable std::mutex mutex_;
    std::set<std::string> names_;
    std::set<std::string> by_breaker_;
    std::atomic<bool> loaded_{false};
    std::atomic<bool> stale_{true};
};

}  // namespace outbox::routing
