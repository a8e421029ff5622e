// Commit groups (handlers.<name>.commit_group): the Worker's side. Several events of one
// handler run one after another on one worker; each call's ctx.db() work and fence go into a
// savepoint of one transaction, so a failed or fenced-out event rolls back only its own
// savepoint, and the group pays one commit. docs/design.md, "Commit groups".
#include "dispatch/commit_group.hpp"

#include <pqxx/pqxx>

#include "db/db_error.hpp"
#include "dispatch/worker.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {

using Kind = core::HandlerOutcome::Kind;
using State = GroupMember::State;

// No other handler's name: a member is its event's one pending handler, and its fence
// completes the event.
const std::vector<std::string> kNoEarlierHandlers;

// What a COMMIT of a group's transaction came to.
struct CommitResult {
    enum class Kind { Committed, Failed, Unknown } kind = Kind::Committed;
    std::string code;  // for Failed
};

// Sends the COMMIT (after rolling back the running member's savepoint when `rollback_to`
// names it), then gives the connection back. With the transaction's mutex held.
CommitResult commit_tx(GroupTx& tx, const std::optional<std::string>& rollback_to) {
    CommitResult result;
    bool drop = tx.broken;
    if (tx.broken) {
        // No COMMIT was sent: the server rolled the transaction back with the connection.
        result = {CommitResult::Kind::Failed, "DB_UNAVAILABLE"};
    } else if (tx.tx) {
        // COMMIT of a transaction in error would answer ROLLBACK without an error; the SELECT
        // before it fails instead (members roll back their own failures, so that would be a
        // bug, never a commit).
        std::string sql = rollback_to ? "ROLLBACK TO SAVEPOINT " + *rollback_to + "; " : std::string();
        sql += "SELECT 1; COMMIT";
        try {
            db::CallGuard guard(**tx.conn);
            tx.tx->exec(sql);
        } catch (...) {
            drop = true;
            const db::DbFailure failure = db::classify_db_error(std::current_exception());
            switch (failure.kind) {
                case db::DbFailureKind::InDoubt:
                case db::DbFailureKind::ConnectionBroken: result = {CommitResult::Kind::Unknown, {}}; break;
                case db::DbFailureKind::Conflict: result = {CommitResult::Kind::Failed, "DB_CONFLICT"}; break;
                case db::DbFailureKind::Timeout: result = {CommitResult::Kind::Failed, "DB_TIMEOUT"}; break;
                default:
                    result = {CommitResult::Kind::Failed,
                              "DB_" + (failure.sqlstate.empty() ? std::string("ERROR") : failure.sqlstate)};
            }
        }
    }
    tx.tx.reset();
    if (tx.conn) {
        if (drop) tx.conn->discard();
        tx.conn.reset();
    }
    tx.open_savepoint.reset();
    tx.broken = false;
    return result;
}

}  // namespace

std::shared_ptr<InFlight> Worker::process_group(std::vector<Work> works, const routing::HandlerEntry& handler) {
    auto group = std::make_shared<CommitGroup>(std::move(works), handler);
    const auto max_wait = handler.settings.commit_group.max_wait;
    for (std::size_t i = 0; i < group->members.size(); ++i) {
        if (!run_member(group, i)) {
            close_group(*group, i);
            return group->members[i].work.flight;
        }
        // The first member's commit waits at most max_wait for the others: then the group
        // commits what it has and the rest go on in a new transaction.
        std::lock_guard lock(group->mutex);
        bool due = false;
        {
            std::lock_guard tx_lock(group->tx.mutex);
            due = group->tx.tx && std::chrono::steady_clock::now() - group->tx.began >= max_wait;
        }
        if (due) commit_pending(*group, false);
    }
    close_group(*group, std::nullopt);
    return nullptr;
}

bool Worker::run_member(const std::shared_ptr<CommitGroup>& group, std::size_t index) {
    GroupMember& member = group->members[index];
    const Work& work = member.work;
    const routing::HandlerEntry& entry = group->entry;
    // Left Waiting, a member is given back when the group closes (its attempt refunded).
    if (stopping_) return true;
    if (work.flight->lost) {
        member.run.outcome = {Kind::LeaseLost, "LEASE_LOST", std::nullopt};
        std::lock_guard lock(group->mutex);
        finish_member(*group, member);
        return true;
    }
    std::optional<FleetLimiter::Permit> permit = acquire_permit(work, entry);
    if (!permit && work.flight->lost) member.run.outcome = {Kind::LeaseLost, "LEASE_LOST", std::nullopt};
    if (!permit || paused_.contains(entry.name)) {
        permit.reset();
        std::lock_guard lock(group->mutex);
        if (member.run.outcome.kind == Kind::LeaseLost) finish_member(*group, member);
        return true;
    }
    // Abandoning this call commits the others without it (close_group); a copy of this
    // worker serves the hook, which may run after this thread has gone.
    work.flight->attach_abandon_hook([worker = *this, group, index]() mutable { worker.close_group(*group, index); });
    telemetry::CallTrace trace = telemetry::start_call(work.claimed.trace, spans_ != nullptr);
    HandlerRun run = run_handler(entry, work.claimed, trace.context, *work.flight, pool_, hard_stop_, abandon_grace_,
                                 &kNoEarlierHandlers, &group->tx, recording_);
    permit.reset();
    detail::record_call_span(spans_, trace, work.claimed.event, entry.name, run);
    note_attempt(work, run);
    if (run.abandoned) {
        metrics_.handler_call(entry.name, "abandoned", run.duration);
        return false;
    }
    work.flight->detach_abandon_hook();
    std::lock_guard lock(group->mutex);
    member.run = std::move(run);
    member.called = true;
    if (member.run.completed) {
        member.state = State::Pending;
    } else {
        finish_member(*group, member);
    }
    return true;
}

void Worker::finish_member(CommitGroup& group, GroupMember& member) {
    const Work& work = member.work;
    const std::string& handler = group.entry.name;
    HandlerRun& run = member.run;
    if (member.called) metrics_.handler_call(handler, detail::result_label(run.outcome.kind), run.duration);
    std::vector<std::string> consumed_now;
    detail::log_outcome(work.claimed.event, handler, run, consumed_now);
    if (run.completed) {
        metrics_.event_outcome(metrics::Metrics::Outcome::Completed);
        in_flight_.remove(work.flight->lease);
    } else {
        decide(work, {run.outcome}, consumed_now);
    }
    member.state = State::Finished;
    queue_.done(work);
}

void Worker::commit_pending(CommitGroup& group, bool abandoned) {
    CommitResult result;
    {
        std::lock_guard tx_lock(group.tx.mutex);
        result = commit_tx(group.tx, abandoned ? group.tx.open_savepoint : std::nullopt);
    }
    for (GroupMember& member : group.members) {
        if (member.state != State::Pending) continue;
        HandlerRun& run = member.run;
        if (result.kind == CommitResult::Kind::Unknown) {
            // Never replayed: the re-read tells whether this member's completion is in.
            run.outcome = reread_consumption(pool_, member.work.flight->lease, group.entry.name);
            run.completed = run.outcome.kind == Kind::Succeeded;
            if (!run.completed) {
                run.call.outcome = attempt_outcome(run);
                run.call.error_code = run.outcome.error_code;
                note_attempt(member.work, run);
            }
        } else if (result.kind == CommitResult::Kind::Failed) {
            run.outcome = {Kind::Retry, result.code, std::nullopt};
            run.completed = false;
            // Its fence's row went with the group's transaction: the call is recorded as failed.
            run.call.outcome = "retry";
            run.call.error_code = result.code;
            note_attempt(member.work, run);
        }
        finish_member(group, member);
    }
}

void Worker::close_group(CommitGroup& group, std::optional<std::size_t> abandoned) {
    std::lock_guard lock(group.mutex);
    if (abandoned) {
        // Whoever closes first (the deadline watch or the returning worker), the hook is not
        // needed any more, and dropping it breaks the flight → hook → group cycle.
        group.members[*abandoned].work.flight->detach_abandon_hook();
        group.members[*abandoned].state = State::Abandoned;
    }
    if (group.closed) return;
    group.closed = true;
    commit_pending(group, abandoned.has_value());
    {
        std::lock_guard tx_lock(group.tx.mutex);
        group.tx.closed = true;  // the stuck call, if it goes on, finds its transaction gone
    }
    std::vector<GroupMember*> unstarted;
    std::vector<lease::LeaseRef> leases;
    for (GroupMember& member : group.members) {
        if (member.state != State::Waiting) continue;
        unstarted.push_back(&member);
        leases.push_back(member.work.flight->lease);
    }
    if (unstarted.empty()) return;
    // Not run (the host stops, a member was abandoned, the handler was paused or its fleet
    // slot did not come): given back with their attempts refunded.
    try {
        auto conn = pool_.acquire(std::chrono::steady_clock::now() + db::connection_settings().call_timeout);
        db::CallGuard guard(*conn);
        lease::LeaseStore(*conn).release(leases);
    } catch (...) {
        log::warn("could not give back " + std::to_string(leases.size()) +
                      " unstarted event(s) of a commit group; their leases will expire",
                  {.code = "RELEASE_FAILED"});
    }
    for (GroupMember* member : unstarted) {
        in_flight_.remove(member->work.flight->lease);
        member->state = State::Finished;
        queue_.done(member->work);
    }
}

}  // namespace outbox::dispatch
