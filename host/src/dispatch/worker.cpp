#include "dispatch/worker.hpp"

#include <algorithm>
#include <random>

#include "dispatch/handler_runner.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
double unit_random() {
    thread_local std::mt19937_64 engine{std::random_device{}()};
    return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

namespace detail {

const char* result_label(core::HandlerOutcome::Kind kind) {
    switch (kind) {
        case core::HandlerOutcome::Kind::Succeeded: return "success";
        case core::HandlerOutcome::Kind::Retry: return "retry";
        case core::HandlerOutcome::Kind::Review: return "review_required";
        case core::HandlerOutcome::Kind::LeaseLost: return "lease_lost";
    }
    return "unknown";
}

void record_call_span(telemetry::SpanExporter* spans, telemetry::CallTrace& trace, const sdk::Event& event,
                      const std::string& handler, const HandlerRun& run) {
    if (!trace.span) return;
    telemetry::finish_call(*trace.span, event.type, handler, event.attempt,
                           run.abandoned ? "abandoned" : result_label(run.outcome.kind),
                           run.abandoned ? std::string("HANDLER_TIMEOUT") : run.outcome.error_code);
    spans->record(std::move(*trace.span));
}

void log_outcome(const sdk::Event& event, const std::string& handler, const HandlerRun& run,
                 std::vector<std::string>& consumed_now) {
    const log::Fields fields{event.id, event.type, handler, event.attempt, run.outcome.error_code, {}};
    switch (run.outcome.kind) {
        case core::HandlerOutcome::Kind::Succeeded:
            if (run.consumption_pending) consumed_now.push_back(handler);
            break;
        case core::HandlerOutcome::Kind::Retry: log::warn("handler failed (retryable)", fields); break;
        case core::HandlerOutcome::Kind::Review: log::warn("handler failed (not retryable)", fields); break;
        case core::HandlerOutcome::Kind::LeaseLost: break;
    }
}

}  // namespace detail

namespace {

using detail::result_label;

// The event's handlers that have not consumed it in an earlier attempt, in order. A replay
// runs its one handler only (the job also marked the others consumed, for older hosts).
std::vector<const routing::HandlerEntry*> pending_handlers(const Work& work) {
    const auto& consumed = work.claimed.consumed_by;
    const std::string& replay = work.claimed.replay_handler;
    std::vector<const routing::HandlerEntry*> pending;
    for (const routing::HandlerEntry* entry : work.handlers->for_type(work.claimed.event.type)) {
        if (!replay.empty() && entry->name != replay) continue;
        if (std::find(consumed.begin(), consumed.end(), entry->name) == consumed.end()) pending.push_back(entry);
    }
    return pending;
}

bool any_failed(const std::vector<core::HandlerOutcome>& outcomes) {
    return std::any_of(outcomes.begin(), outcomes.end(), [](const core::HandlerOutcome& o) {
        return o.kind != core::HandlerOutcome::Kind::Succeeded;
    });
}

bool all_succeeded(const std::vector<core::HandlerOutcome>& outcomes) {
    return std::all_of(outcomes.begin(), outcomes.end(), [](const core::HandlerOutcome& o) {
        return o.kind == core::HandlerOutcome::Kind::Succeeded;
    });
}

}  // namespace

using detail::log_outcome;
using detail::record_call_span;

const routing::HandlerEntry* grouping_handler(const Work& work) {
    if (work.suspect) return nullptr;
    const std::vector<const routing::HandlerEntry*> pending = pending_handlers(work);
    if (pending.size() != 1 || pending.front()->settings.commit_group.max_events < 2) return nullptr;
    return pending.front();
}

bool Worker::process(const Work& work) {
    const bool keep_working = process_handlers(work);
    // A probe whose handler was not called (consumed already, lease lost, host stopping)
    // is given back undecided, so another probe can run at once.
    if (work.probe && !work.probe->settled) breakers_.probe_released(*work.probe);
    return keep_working;
}

void Worker::note_attempt(const Work& work, const HandlerRun& run) const {
    if (run.completed || run.call.outcome.empty() || !lease::records(recording_->mode, run.call.outcome)) return;
    work.flight->calls.push_back(run.call);
}

void Worker::note_call(const Work& work, const routing::HandlerEntry& entry, core::HandlerOutcome::Kind kind) {
    if (work.probe && work.probe->handler == entry.name) {
        const auto cool_down = entry.settings.circuit_breaker.value_or(config::CircuitBreakerSettings{}).cool_down;
        breakers_.probe_finished(*work.probe, kind, cool_down);
        return;
    }
    breakers_.record(entry, kind);
}

bool Worker::process_handlers(const Work& work) {
    std::vector<core::HandlerOutcome> outcomes;
    std::vector<std::string> consumed_now;
    const std::vector<const routing::HandlerEntry*> pending = pending_handlers(work);
    for (const routing::HandlerEntry* entry : pending) {
        const Step step = call_handler(work, *entry, entry == pending.back(), outcomes, consumed_now);
        if (step == Step::Next) continue;
        if (step == Step::Decide) break;
        return step == Step::Done;
    }
    decide(work, outcomes, consumed_now);
    return true;
}

Worker::Step Worker::call_handler(const Work& work, const routing::HandlerEntry& entry, bool last,
                                  std::vector<core::HandlerOutcome>& outcomes, std::vector<std::string>& consumed_now) {
    if (work.flight->lost) {
        outcomes.push_back({core::HandlerOutcome::Kind::LeaseLost, "LEASE_LOST", std::nullopt});
        return Step::Decide;
    }
    std::optional<FleetLimiter::Permit> permit = acquire_permit(work, entry);
    if (!permit) {
        if (work.flight->lost) {
            outcomes.push_back({core::HandlerOutcome::Kind::LeaseLost, "LEASE_LOST", std::nullopt});
            return Step::Decide;
        }
        release(work);
        return Step::Done;
    }
    // Paused since the claim: the call does not start. The event waits without using the
    // attempt, unless a handler already failed in it (that failure decides as usual). An open
    // circuit breaker's probe is the one call its paused handler gets.
    const bool probe = work.probe && work.probe->handler == entry.name;
    if (paused_.contains(entry.name) && !probe) {
        permit.reset();
        const bool failed_so_far = any_failed(outcomes);
        if (failed_so_far) return Step::Decide;
        release(work);
        return Step::Done;
    }
    // The last handler of an attempt that went well so far may complete the event in
    // its own transaction.
    const bool clean_so_far = all_succeeded(outcomes);
    return run_call(work, entry, permit, last && clean_so_far, outcomes, consumed_now);
}

std::optional<FleetLimiter::Permit> Worker::acquire_permit(const Work& work, const routing::HandlerEntry& entry) {
    // A fleet slot is waited for at most one call's timeout: a slot held by a stuck call
    // (kept until that call returns) must not hold this worker and its lease for good.
    // Given up, the event goes back with its attempt refunded (release in call_handler).
    const auto wait_for_slot_until = std::chrono::steady_clock::now() + entry.settings.timeout;
    return FleetLimiter::limited(entry.settings)
               ? limiter_.acquire(entry,
                                  [&] {
                                      return work.flight->lost || stopping_ ||
                                             std::chrono::steady_clock::now() >= wait_for_slot_until;
                                  })
               : std::optional<FleetLimiter::Permit>(std::in_place);
}

Worker::Step Worker::run_call(const Work& work, const routing::HandlerEntry& entry,
                              std::optional<FleetLimiter::Permit>& permit, bool may_complete,
                              std::vector<core::HandlerOutcome>& outcomes, std::vector<std::string>& consumed_now) {
    const sdk::Event& event = work.claimed.event;
    telemetry::CallTrace trace = telemetry::start_call(work.claimed.trace, spans_ != nullptr);
    HandlerRun run = run_handler(entry, work.claimed, trace.context, *work.flight, pool_, hard_stop_,
                                 abandon_grace_, may_complete ? &consumed_now : nullptr, nullptr, recording_);
    permit.reset();
    record_call_span(spans_, trace, event, entry.name, run);
    note_attempt(work, run);
    if (run.abandoned) {
        metrics_.handler_call(entry.name, "abandoned", run.duration);
        note_call(work, entry, core::HandlerOutcome::Kind::Retry);  // stored as HANDLER_TIMEOUT, retryable
        return Step::Abandoned;
    }
    metrics_.handler_call(entry.name, result_label(run.outcome.kind), run.duration);
    note_call(work, entry, run.outcome.kind);
    log_outcome(event, entry.name, run, consumed_now);
    if (run.completed) {
        metrics_.event_outcome(metrics::Metrics::Outcome::Completed);
        in_flight_.remove(work.flight->lease);
        return Step::Done;
    }
    outcomes.push_back(std::move(run.outcome));
    return outcomes.back().kind == core::HandlerOutcome::Kind::LeaseLost ? Step::Decide : Step::Next;
}

void Worker::decide(const Work& work, const std::vector<core::HandlerOutcome>& outcomes,
                    std::vector<std::string>& consumed_now) {
    const sdk::Event& event = work.claimed.event;
    const auto transition = core::decide_transition(outcomes, event.attempt, max_attempts_, policy_,
                                                    std::chrono::system_clock::now(), unit_random());
    if (!transition) {
        // Counted once: by the heartbeat when it found the loss, else here (the fence found it).
        if (!work.flight->lost.exchange(true)) metrics_.leases_lost(1);
        log::warn("lease lost during the attempt; its result was discarded", {event.id, event.type, {}, event.attempt, "LEASE_LOST", {}});
        in_flight_.remove(work.flight->lease);
        return;
    }
    if (transition->status == core::EventStatus::ReviewRequired) {
        log::error("event needs review", {event.id, event.type, {}, event.attempt, transition->error_code, {}});
    }
    work.flight->finishing = true;
    // A first-attempt completion needs no consumption rows: the status says it (see the
    // fence in handler_runner.cpp). Rows stay the record of partial progress.
    if (transition->status == core::EventStatus::Completed && event.attempt == 1) consumed_now.clear();
    completer_.submit(
        lease::Finish{work.flight->lease, *transition, std::move(consumed_now), std::move(work.flight->calls)});
}

void Worker::release(const Work& work) {
    // Handlers that already succeeded in this attempt without ctx.db() will run again:
    // at-least-once allows it, and the attempt is not counted.
    try {
        auto conn = pool_.acquire(std::chrono::steady_clock::now() + db::connection_settings().call_timeout);
        db::CallGuard guard(*conn);
        lease::LeaseStore(*conn).release({work.flight->lease});
    } catch (...) {
        log::warn("could not give back an unstarted event; its lease will expire",
                  {.event_id = work.claimed.event.id, .code = "RELEASE_FAILED"});
    }
    in_flight_.remove(work.flight->lease);
}

}  // namespace outbox::dispatch
