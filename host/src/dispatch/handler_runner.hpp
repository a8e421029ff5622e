#pragma once

#include <atomic>
#include <chrono>

#include "core/transition.hpp"
#include "db/connection_pool.hpp"
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
};

/// Turns one (handler, event) into an outcome value. Never throws: a plugin's exception is
/// classified by the plugin's own classify() inside the catch block (while its library is
/// loaded), and only the sanitized code leaves this function. When the handler used
/// ctx.db(), its transaction commits together with the consumption row after the lease
/// fence; a commit whose outcome is unknown is re-read, never replayed.
///
/// `completes` is given for the last handler of an attempt whose earlier handlers all
/// succeeded; it names those that did so without ctx.db(). If this handler used ctx.db()
/// and succeeds, its transaction also records them and completes the event
/// (HandlerRun::completed), so the event needs no separate outcome write.
///
/// The call's deadline is handlers.<name>.timeout from now; `abandon_grace` after it the
/// host may abandon the call (see InFlight::Call).
/// `trace` is what the call's ctx.trace() returns.
HandlerRun run_handler(const routing::HandlerEntry& entry, const lease::ClaimedEvent& claimed,
                       const sdk::TraceContext& trace, InFlight& flight, db::ConnectionPool& pool, const std::atomic<bool>& hard_stop,
                       std::chrono::milliseconds abandon_grace, const std::vector<std::string>* completes = nullptr);

}  // namespace outbox::dispatch
