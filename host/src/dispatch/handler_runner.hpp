#pragma once

#include <atomic>
#include <chrono>

#include "core/transition.hpp"
#include "db/connection_pool.hpp"
#include "dispatch/host_context.hpp"
#include "dispatch/in_flight.hpp"
#include "lease/lease_store.hpp"
#include "routing/handler_set.hpp"

namespace outbox::dispatch {

/// The result of one handler call on one event.
struct HandlerRun {
    core::HandlerOutcome outcome;
    /// The handler succeeded without ctx.db(): its consumption row is still to be written,
    /// batched with the event's fenced status update.
    bool consumption_pending = false;
    /// The handler's transaction also moved the event to COMPLETED (see `completes`).
    bool completed = false;
    /// handle() did not return by its deadline plus the grace: the host abandoned the call,
    /// and the attempt ends as HANDLER_TIMEOUT now that it returned (Runtime::store_timeout).
    /// Nothing of this run may be used or written.
    bool abandoned = false;
    std::chrono::nanoseconds duration{0};
    /// The call as outbox_attempt records it (handler, start, end, outcome, error code).
    lease::AttemptCall call;
};

/// outbox_attempt's outcome for a call that ended as `run` did ("" for a lost lease, which
/// no row records: the host that lost it cannot write).
std::string attempt_outcome(const HandlerRun& run);

/// After a commit whose outcome is unknown: Succeeded when the handler's consumption row or
/// the event's completion is in, else a retry (DB_UNAVAILABLE). Never replays the commit.
core::HandlerOutcome reread_consumption(db::ConnectionPool& pool, const lease::LeaseRef& lease,
                                        const std::string& handler_name);

/// Turns one (handler, event) into an outcome value; never throws (docs/design.md, "One
/// handler call"). `completes` names the earlier handlers of an attempt that succeeded
/// without ctx.db(); `trace` is what the call's ctx.trace() returns. With `group` (a commit
/// group's transaction) the call's ctx.db() work and fence go into a savepoint of it, and
/// `completed` means "fenced, completes when the group commits".
HandlerRun run_handler(const routing::HandlerEntry& entry, const lease::ClaimedEvent& claimed,
                       const sdk::TraceContext& trace, InFlight& flight, db::ConnectionPool& pool, const std::atomic<bool>& hard_stop,
                       std::chrono::milliseconds abandon_grace, const std::vector<std::string>* completes = nullptr,
                       GroupTx* group = nullptr, const lease::AttemptRecording* recording = nullptr);

}  // namespace outbox::dispatch
