#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <pqxx/connection>

#include "config/config.hpp"
#include "core/circuit_window.hpp"
#include "core/transition.hpp"
#include "db/connection_pool.hpp"
#include "db/db_session.hpp"
#include "metrics/metrics.hpp"
#include "routing/handler_set.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::dispatch {

/// The probe of an open breaker this host took: the one call of its handler the fleet
/// makes until the probe's verdict. `token` fences the verdict.
struct Probe {
    std::string handler;
    std::string token;
    std::atomic<bool> settled{false};  // a verdict or a release was sent
};

/// The circuit breakers of this host's handlers (`handlers.<name>.circuit_breaker`; see
/// docs/design.md, "Circuit breakers"). Each host judges its own calls over its window; a
/// host whose window trips pauses the handler fleet-wide (outbox_handler_pause, paused_by
/// "circuit-breaker"). After the cool-down one host takes the probe through the database,
/// and the probe's verdict resumes the handler or keeps it paused for another cool-down.
/// Thread-safe.
class CircuitBreakers {
public:
    CircuitBreakers(std::string host_id, db::ConnectionPool& pool, metrics::Metrics& metrics,
                    routing::PausedHandlers& paused, db::Wakeup& wakeup)
        : host_id_(std::move(host_id)), pool_(pool), metrics_(metrics), paused_(paused), wakeup_(wakeup) {}

    /// A call of `entry` (not a probe) ended with `kind`. Counts it when the handler has a
    /// breaker and is not paused; opens the breaker when the window trips.
    void record(const routing::HandlerEntry& entry, core::HandlerOutcome::Kind kind);
    /// Forgets the calls of `paused` handlers: a window starts empty once its handler runs again.
    void forget(const std::set<std::string>& paused);

    /// Takes the probe of `handler` when its cool-down is over and no other host holds it (one
    /// statement on `conn`); `hold`: how long before another host may take it over.
    struct TakeResult {
        std::optional<std::string> token;              // the probe was taken
        std::optional<std::chrono::milliseconds> due_in;  // not taken: when it may be due (none: not open)
    };
    TakeResult take_probe(pqxx::connection& conn, const std::string& handler, std::chrono::milliseconds hold);
    /// Gives back a probe that found no event to call (one statement on `conn`).
    void release_probe(pqxx::connection& conn, const std::string& handler, const std::string& token);
    /// When this host should next try to take `handler`'s probe.
    [[nodiscard]] std::chrono::steady_clock::time_point next_probe_try(const std::string& handler) const;
    void set_next_probe_try(const std::string& handler, std::chrono::steady_clock::time_point when);

    /// The probe call ended: a retryable failure keeps the breaker open for another cool-down
    /// (`cool_down`); any other outcome closes it (resumes the handler, audited).
    void probe_finished(Probe& probe, core::HandlerOutcome::Kind kind, std::chrono::milliseconds cool_down);
    /// The probe's event ran without calling its handler: the probe is given back undecided.
    void probe_released(Probe& probe);

private:
    /// Pauses `entry` fleet-wide as the breaker (audited, NOTIFY), unless it is paused already.
    void open(const routing::HandlerEntry& entry, core::CircuitWindow::Tally tally);
    /// Runs `work` on a pooled connection; false (logged with `what`) when it failed.
    template <class Work>
    bool with_connection(const char* what, const std::string& handler, Work&& work);

    const std::string host_id_;
    db::ConnectionPool& pool_;
    metrics::Metrics& metrics_;
    routing::PausedHandlers& paused_;
    db::Wakeup& wakeup_;
    struct Window {
        config::CircuitBreakerSettings settings;  // a changed configuration starts a new window
        core::CircuitWindow calls;
    };
    mutable std::mutex mutex_;
    std::map<std::string, Window> windows_;
    std::map<std::string, std::chrono::steady_clock::time_point> next_probe_try_;
};

}  // namespace outbox::dispatch
