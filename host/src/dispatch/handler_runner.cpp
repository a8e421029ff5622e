#include "dispatch/handler_runner.hpp"

#include <functional>

#include <pqxx/pqxx>

#include "db/db_error.hpp"
#include "db/event_sql.hpp"
#include "dispatch/host_context.hpp"

namespace outbox::dispatch {
namespace {

using Kind = core::HandlerOutcome::Kind;

core::HandlerOutcome from_disposition(const sdk::Disposition& disposition) {
    core::HandlerOutcome outcome;
    outcome.kind = disposition.kind == sdk::Disposition::Kind::Review ? Kind::Review : Kind::Retry;
    outcome.error_code = core::sanitize_error_code(disposition.code);
    outcome.retry_after = disposition.retry_after;
    if (outcome.retry_after && outcome.retry_after->count() < 0) outcome.retry_after.reset();
    return outcome;
}

core::HandlerOutcome failed(Kind kind, std::string code) { return core::HandlerOutcome{kind, std::move(code), std::nullopt}; }

// Called only inside a catch block of an exception thrown by the plugin.
sdk::Disposition classify_current(const sdk::Handler& handler, const std::exception& error) noexcept {
    try {
        return handler.classify(error);
    } catch (...) {
        return sdk::Disposition::retry("UNCLASSIFIED");
    }
}

}  // namespace

// A commit that lost its connection may or may not have happened: look, never replay.
core::HandlerOutcome reread_consumption(db::ConnectionPool& pool, const lease::LeaseRef& lease,
                                        const std::string& handler_name) {
    try {
        auto conn = pool.acquire(std::chrono::steady_clock::now() + db::connection_settings().call_timeout);
        db::CallGuard guard(*conn);
        pqxx::read_transaction tx(*conn);
        const auto rows = tx.exec_params(db::event_sql::kConsumedOrCompleted, lease.event_id, handler_name);
        if (!rows.empty()) return core::HandlerOutcome{Kind::Succeeded, {}, std::nullopt};
    } catch (...) {
        // Still unknown: a retry is safe because a committed consumption row makes the
        // next attempt skip this handler, and a committed completion fences it out.
    }
    return failed(Kind::Retry, "DB_UNAVAILABLE");
}

namespace {

// `record`: the call's outbox_attempt row, written with the completion it records.
core::HandlerOutcome commit_with_fence(HostDb& db, db::ConnectionPool& pool, InFlight& flight,
                                       const std::string& handler_name, const std::vector<std::string>* completes,
                                       int attempt, const std::function<std::string(pqxx::connection_base&)>& record) {
    const lease::LeaseRef& lease = flight.lease;
    std::vector<std::string> names;
    if (completes != nullptr) {
        names = *completes;
        // From here the event's outcome is decided by this fenced write, as for an outcome
        // handed to the completer: a heartbeat that finds the lease gone is not a loss.
        flight.finishing = true;
    }
    names.push_back(handler_name);
    // Completed in its first attempt: COMPLETED already says that every handler consumed the
    // event, so no consumption rows are written (rows record partial progress only).
    if (completes != nullptr && attempt == 1) names.clear();
    try {
        std::string sql = lease::fence_statement(*db.connection(), lease, names, completes != nullptr);
        if (completes != nullptr && record) sql += "; " + record(*db.connection());
        db.commit_with(sql);
        return core::HandlerOutcome{Kind::Succeeded, {}, std::nullopt};
    } catch (...) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        if (failure.sqlstate == lease::kLeaseLostSqlstate) {
            db.rollback();
            return failed(Kind::LeaseLost, "LEASE_LOST");
        }
        switch (failure.kind) {
            case db::DbFailureKind::InDoubt:
                db.discard();
                return reread_consumption(pool, lease, handler_name);
            case db::DbFailureKind::ConnectionBroken:
                db.discard();
                return reread_consumption(pool, lease, handler_name);
            case db::DbFailureKind::Conflict: db.rollback(); return failed(Kind::Retry, "DB_CONFLICT");
            case db::DbFailureKind::Timeout: db.rollback(); return failed(Kind::Retry, "DB_TIMEOUT");
            case db::DbFailureKind::Sql:
                db.rollback();
                return failed(Kind::Review, "DB_" + (failure.sqlstate.empty() ? std::string("ERROR") : failure.sqlstate));
            case db::DbFailureKind::Other: db.rollback(); return failed(Kind::Retry, "DB_ERROR");
        }
    }
    return failed(Kind::Retry, "DB_ERROR");
}

}  // namespace

HandlerRun run_handler(const routing::HandlerEntry& entry, const lease::ClaimedEvent& claimed,
                       const sdk::TraceContext& trace, InFlight& flight, db::ConnectionPool& pool, const std::atomic<bool>& hard_stop,
                       std::chrono::milliseconds abandon_grace, const std::vector<std::string>* completes,
                       GroupTx* group, const lease::AttemptRecording* recording) {
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = started + entry.settings.timeout;
    HandlerRun run;
    run.call.handler = entry.name;
    run.call.started = std::chrono::system_clock::now();
    HostDb db(pool, deadline, flight, hard_stop, group);
    HostContext ctx(db, flight.lost, hard_stop, deadline, entry.settings.config_json, claimed.event.id,
                    claimed.event.type, entry.name, claimed.event.attempt, trace,
                    claimed.replay_handler == entry.name);
    flight.call_started(deadline + abandon_grace);

    std::optional<sdk::Disposition> thrown;
    try {
        entry.handler->handle(claimed.event, ctx);
    } catch (const std::exception& error) {
        thrown = classify_current(*entry.handler, error);
    } catch (...) {
        thrown = sdk::Disposition::retry("UNCLASSIFIED");
    }
    run.call.ended = std::chrono::system_clock::now();

    if (!flight.call_returned()) {
        // The host gave up on this call and stored its outcome; a late result changes nothing.
        db.rollback();
        run.abandoned = true;
        run.outcome = failed(Kind::Retry, "HANDLER_TIMEOUT");
    } else if (flight.lost) {
        db.rollback();
        run.outcome = failed(Kind::LeaseLost, "LEASE_LOST");
    } else if (thrown) {
        db.rollback();
        run.outcome = from_disposition(*thrown);
    } else if (db.failure()) {
        db.rollback();
        run.outcome = failed(db.failure()->first ? Kind::Retry : Kind::Review, db.failure()->second);
    } else if (db.opened()) {
        // A completing fence writes the call's row itself: no outcome of the completer follows.
        std::function<std::string(pqxx::connection_base&)> record;
        if (recording != nullptr && lease::records(recording->mode, "succeeded")) {
            record = [&](pqxx::connection_base& conn) {
                // The attempt's earlier calls (other handlers, which all succeeded, or this
                // call would not complete the event) go with it: no outcome follows.
                std::vector<lease::AttemptCall> calls = flight.calls;
                calls.push_back(run.call);
                calls.back().outcome = "succeeded";
                return lease::attempt_insert_statement(conn, claimed.event, recording->host, calls);
            };
        }
        run.outcome = commit_with_fence(db, pool, flight, entry.name, completes, claimed.event.attempt, record);
        // The consumption row and the completion commit together: a success (also one
        // re-read after an unknown commit outcome) means the event is COMPLETED.
        run.completed = completes != nullptr && run.outcome.kind == Kind::Succeeded;
    } else {
        run.outcome = core::HandlerOutcome{Kind::Succeeded, {}, std::nullopt};
        run.consumption_pending = true;
    }
    run.duration = std::chrono::steady_clock::now() - started;
    run.call.outcome = attempt_outcome(run);
    run.call.error_code = run.outcome.kind == Kind::Succeeded ? std::string() : run.outcome.error_code;
    return run;
}

std::string attempt_outcome(const HandlerRun& run) {
    if (run.abandoned) return "timeout";
    switch (run.outcome.kind) {
        case Kind::Succeeded: return "succeeded";
        case Kind::Retry: return "retry";
        case Kind::Review: return "review_required";
        case Kind::LeaseLost: return {};
    }
    return {};
}

}  // namespace outbox::dispatch
