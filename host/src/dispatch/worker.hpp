#pragma once

#include <atomic>

#include "core/retry_policy.hpp"
#include "db/connection_pool.hpp"
#include "dispatch/circuit_breaker.hpp"
#include "dispatch/completer.hpp"
#include "dispatch/fleet_limiter.hpp"
#include "dispatch/in_flight.hpp"
#include "dispatch/work_queue.hpp"
#include "metrics/metrics.hpp"
#include "routing/paused_handlers.hpp"
#include "telemetry/span_exporter.hpp"

namespace outbox::dispatch {

/// A draw in [0, 1) for the retry jitter.
double unit_random();

struct CommitGroup;
struct GroupMember;
struct HandlerRun;

namespace detail {
// Shared by the single-event path (worker.cpp) and commit groups (commit_group.cpp).
const char* result_label(core::HandlerOutcome::Kind kind);
void record_call_span(telemetry::SpanExporter* spans, telemetry::CallTrace& trace, const sdk::Event& event,
                      const std::string& handler, const HandlerRun& run);
void log_outcome(const sdk::Event& event, const std::string& handler, const HandlerRun& run,
                 std::vector<std::string>& consumed_now);
}  // namespace detail

/// The handler whose commit group `work` may join: its event's one pending handler when
/// that handler has handlers.<name>.commit_group on; null otherwise.
const routing::HandlerEntry* grouping_handler(const Work& work);

/// Runs every handler of one claimed event that has not consumed it yet, folds their
/// outcomes into the event's next state and hands that to the completer.
class Worker {
public:
    /// Copyable: a copy serves a commit group's abandon hook, which may outlive this worker
    /// (every member refers to the runtime's objects only).
    Worker(db::ConnectionPool& pool, Completer& completer, InFlightTable& in_flight, FleetLimiter& limiter,
           metrics::Metrics& metrics, WorkQueue& queue, const std::atomic<bool>& stopping,
           const std::atomic<bool>& hard_stop, core::RetryPolicy policy, int max_attempts,
           std::chrono::milliseconds abandon_grace, const routing::PausedHandlers& paused, CircuitBreakers& breakers,
           const lease::AttemptRecording& recording, telemetry::SpanExporter* spans = nullptr)
        : pool_(pool), completer_(completer), in_flight_(in_flight), limiter_(limiter), metrics_(metrics),
          queue_(queue), stopping_(stopping), hard_stop_(hard_stop), policy_(policy), max_attempts_(max_attempts),
          abandon_grace_(abandon_grace), paused_(paused), breakers_(breakers), recording_(&recording), spans_(spans) {}

    /// Returns false when the host abandoned one of the event's handler calls (it overran
    /// its deadline plus the grace): the host has stored the outcome and freed the slot,
    /// and this thread must stop working.
    [[nodiscard]] bool process(const Work& work);

    /// Runs a commit group of `handler` (commit_group.cpp): each event's call in turn, its
    /// ctx.db() work in a savepoint of the group's transaction, committed together; frees
    /// every member's queue slot. Returns the flight of a member whose call the host
    /// abandoned (this thread must then stop working, as for process() returning false), or
    /// null.
    [[nodiscard]] std::shared_ptr<InFlight> process_group(std::vector<Work> works, const routing::HandlerEntry& handler);

private:
    bool process_handlers(const Work& work);
    /// Keeps the call for the attempt's outbox_attempt rows (as outbox.attempt_history says),
    /// unless its fence wrote its row already or its lease was lost.
    void note_attempt(const Work& work, const HandlerRun& run) const;
    /// Tells the circuit breakers how a call ended (a probe's verdict, or one call of the window).
    void note_call(const Work& work, const routing::HandlerEntry& entry, core::HandlerOutcome::Kind kind);
    /// Gives the event back without counting the attempt (host stopping before a call, or
    /// a handler paused since the claim).
    void release(const Work& work);

    /// What process() does after one handler's step.
    enum class Step {
        Next,       // go on with the next handler
        Decide,     // call no more handlers; the outcomes so far decide the event's next state
        Done,       // the event was completed or given back: nothing left to do
        Abandoned,  // the host abandoned the call: process() returns false
    };
    /// One handler's turn: waits for its fleet permit, skips it if paused, else calls it.
    Step call_handler(const Work& work, const routing::HandlerEntry& entry, bool last,
                      std::vector<core::HandlerOutcome>& outcomes, std::vector<std::string>& consumed_now);
    std::optional<FleetLimiter::Permit> acquire_permit(const Work& work, const routing::HandlerEntry& entry);
    /// Calls the handler (traced), gives the permit back and records the outcome.
    Step run_call(const Work& work, const routing::HandlerEntry& entry, std::optional<FleetLimiter::Permit>& permit,
                  bool may_complete, std::vector<core::HandlerOutcome>& outcomes,
                  std::vector<std::string>& consumed_now);
    /// Folds the outcomes into the event's next state and hands it to the completer.
    void decide(const Work& work, const std::vector<core::HandlerOutcome>& outcomes,
                std::vector<std::string>& consumed_now);

    // Commit groups (commit_group.cpp).
    /// Runs member `index`'s call; false when the host abandoned it.
    bool run_member(const std::shared_ptr<CommitGroup>& group, std::size_t index);
    /// Stores or hands on a member's outcome and frees its queue slot. With the group's mutex held.
    void finish_member(CommitGroup& group, GroupMember& member);
    /// Commits the group's transaction (rolling back the savepoint of `abandoned`'s call, if
    /// it has one) and finishes its pending members. With the group's mutex held.
    void commit_pending(CommitGroup& group, bool abandoned);
    /// Commits what is pending and gives back the members that never ran; once. From the
    /// worker, or from the host's deadline watch when member `abandoned` overran.
    void close_group(CommitGroup& group, std::optional<std::size_t> abandoned);

    db::ConnectionPool& pool_;
    Completer& completer_;
    InFlightTable& in_flight_;
    FleetLimiter& limiter_;
    metrics::Metrics& metrics_;
    WorkQueue& queue_;
    const std::atomic<bool>& stopping_;
    const std::atomic<bool>& hard_stop_;
    core::RetryPolicy policy_;
    int max_attempts_;
    std::chrono::milliseconds abandon_grace_;
    const routing::PausedHandlers& paused_;
    CircuitBreakers& breakers_;
    const lease::AttemptRecording* recording_;
    telemetry::SpanExporter* spans_;  // null: no spans
};

}  // namespace outbox::dispatch
