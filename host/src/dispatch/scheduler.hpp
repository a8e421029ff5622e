#pragma once

#include <atomic>
#include <memory>
#include <stop_token>

#include "db/db_session.hpp"
#include "db/outage_log.hpp"
#include "dispatch/circuit_breaker.hpp"
#include "dispatch/in_flight.hpp"
#include "dispatch/loop_observer.hpp"
#include "dispatch/runtime_options.hpp"
#include "dispatch/work_queue.hpp"
#include "metrics/metrics.hpp"
#include "routing/handler_set.hpp"
#include "routing/paused_handlers.hpp"
#include "telemetry/span_exporter.hpp"

namespace outbox::dispatch {

/// Claims due events of the types this host handles, never more than the work queue has
/// free slots for, and hands them to the workers, with one suspect at a time for the
/// suspect lane (wake-ups and paused handlers: docs/design.md, "The scheduler").
class Scheduler {
public:
    Scheduler(const RuntimeOptions& options, db::OutageLog& outage, WorkQueue& queue, InFlightTable& in_flight,
              db::Wakeup& wakeup, metrics::Metrics& metrics, const routing::CurrentHandlers& handlers, routing::PausedHandlers& paused,
              CircuitBreakers& breakers, LoopObserver* observer = nullptr, telemetry::SpanExporter* spans = nullptr)
        : options_(options), outage_(outage), queue_(queue), in_flight_(in_flight), wakeup_(wakeup),
          metrics_(metrics), handlers_(handlers), paused_(paused), breakers_(breakers), observer_(observer),
          spans_(spans) {}

    void run(std::stop_token stop);

private:
    struct Loop;
    struct Claimable;

    /// Re-reads the paused handlers when due; false when the read failed (the pass ends).
    bool refresh_paused(Loop& loop, const std::stop_token& stop);
    /// Takes the probe of each open circuit breaker of this host's handlers that is due, and
    /// claims one event for it; false when that failed.
    bool probe_breakers(Loop& loop, const std::stop_token& stop);
    bool probe_breaker(Loop& loop, const routing::HandlerEntry& entry, const std::stop_token& stop);
    /// How long an idle pass may wait: the poll interval, or less when a probe is due sooner.
    [[nodiscard]] std::chrono::milliseconds idle_wait(const Loop& loop) const;
    Claimable claimable_types(const routing::HandlerSet& handlers) const;
    /// Gives back leases this process holds but no longer tracks, when due; false when that failed.
    bool release_untracked(Loop& loop, const std::stop_token& stop);
    /// Claims one suspect for the suspect lane, when due; false when the claim failed.
    bool claim_suspect(Loop& loop, const std::vector<std::string>& types, const std::stop_token& stop);
    /// Room for normal work: the queue's free slots less outcomes piling up beyond a batch.
    int free_slots() const;
    /// Claims normal work into `free` slots, hands it out and waits unless more is due.
    void claim_normal(Loop& loop, const Claimable& claimable, int free, const std::stop_token& stop);
    void hand_out(const Loop& loop, std::vector<lease::ClaimedEvent>& claimed, bool suspect, std::uint64_t started,
                  std::shared_ptr<Probe> probe = nullptr);

    const RuntimeOptions& options_;
    db::OutageLog& outage_;
    WorkQueue& queue_;
    InFlightTable& in_flight_;
    db::Wakeup& wakeup_;
    metrics::Metrics& metrics_;
    const routing::CurrentHandlers& handlers_;
    routing::PausedHandlers& paused_;
    CircuitBreakers& breakers_;
    LoopObserver* observer_;
    telemetry::SpanExporter* spans_;  // null: no spans
};

}  // namespace outbox::dispatch
