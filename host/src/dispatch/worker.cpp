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

namespace {

const char* result_label(core::HandlerOutcome::Kind kind) {
    switch (kind) {
        case core::HandlerOutcome::Kind::Succeeded: return "success";
        case core::HandlerOutcome::Kind::Retry: return "retry";
        case core::HandlerOutcome::Kind::Review: return "review_required";
        case core::HandlerOutcome::Kind::LeaseLost: return "lease_lost";
    }
    return "unknown";
}

}  // namespace

bool Worker::process(const Work& work) {
    const sdk::Event& event = work.claimed.event;
    const auto& consumed = work.claimed.consumed_by;
    std::vector<core::HandlerOutcome> outcomes;
    std::vector<std::string> consumed_now;

    std::vector<const routing::HandlerEntry*> pending;
    for (const routing::HandlerEntry* entry : work.handlers->for_type(event.type)) {
        if (std::find(consumed.begin(), consumed.end(), entry->name) == consumed.end()) pending.push_back(entry);
    }

    for (const routing::HandlerEntry* entry : pending) {
        if (work.flight->lost) {
            outcomes.push_back({core::HandlerOutcome::Kind::LeaseLost, "LEASE_LOST", std::nullopt});
            break;
        }
        // A fleet slot is waited for at most one call's timeout: a slot held by a stuck call
        // (kept until that call returns) must not hold this worker and its lease for good.
        // Given up, the event goes back with its attempt refunded (release below).
        const auto wait_for_slot_until = std::chrono::steady_clock::now() + entry->settings.timeout;
        std::optional<FleetLimiter::Permit> permit =
            FleetLimiter::limited(entry->settings)
                ? limiter_.acquire(*entry,
                                   [&] {
                                       return work.flight->lost || stopping_ ||
                                              std::chrono::steady_clock::now() >= wait_for_slot_until;
                                   })
                : std::optional<FleetLimiter::Permit>(std::in_place);
        if (!permit) {
            if (work.flight->lost) {
                outcomes.push_back({core::HandlerOutcome::Kind::LeaseLost, "LEASE_LOST", std::nullopt});
                break;
            }
            release(work);
            return true;
        }
        // Paused since the claim: the call does not start. The event waits without using the
        // attempt, unless a handler already failed in it (that failure decides as usual).
        if (paused_.contains(entry->name)) {
            permit.reset();
            const bool failed_so_far = std::any_of(outcomes.begin(), outcomes.end(), [](const core::HandlerOutcome& o) {
                return o.kind != core::HandlerOutcome::Kind::Succeeded;
            });
            if (failed_so_far) break;
            release(work);
            return true;
        }
        // The last handler of an attempt that went well so far may complete the event in
        // its own transaction.
        const bool clean_so_far = std::all_of(outcomes.begin(), outcomes.end(), [](const core::HandlerOutcome& o) {
            return o.kind == core::HandlerOutcome::Kind::Succeeded;
        });
        const bool last = entry == pending.back();
        telemetry::CallTrace trace = telemetry::start_call(work.claimed.trace, spans_ != nullptr);
        HandlerRun run = run_handler(*entry, work.claimed, trace.context, *work.flight, pool_, hard_stop_,
                                     abandon_grace_, last && clean_so_far ? &consumed_now : nullptr);
        permit.reset();
        if (trace.span) {
            telemetry::finish_call(*trace.span, event.type, entry->name, event.attempt,
                                   run.abandoned ? "abandoned" : result_label(run.outcome.kind),
                                   run.abandoned ? std::string("HANDLER_TIMEOUT") : run.outcome.error_code);
            spans_->record(std::move(*trace.span));
        }
        if (run.abandoned) {
            metrics_.handler_call(entry->name, "abandoned", run.duration);
            return false;
        }
        metrics_.handler_call(entry->name, result_label(run.outcome.kind), run.duration);
        const log::Fields fields{event.id, event.type, entry->name, event.attempt, run.outcome.error_code, {}};
        switch (run.outcome.kind) {
            case core::HandlerOutcome::Kind::Succeeded:
                if (run.consumption_pending) consumed_now.push_back(entry->name);
                break;
            case core::HandlerOutcome::Kind::Retry: log::warn("handler failed (retryable)", fields); break;
            case core::HandlerOutcome::Kind::Review: log::warn("handler failed (not retryable)", fields); break;
            case core::HandlerOutcome::Kind::LeaseLost: break;
        }
        if (run.completed) {
            metrics_.event_outcome(metrics::Metrics::Outcome::Completed);
            in_flight_.remove(work.flight->lease);
            return true;
        }
        outcomes.push_back(std::move(run.outcome));
        if (outcomes.back().kind == core::HandlerOutcome::Kind::LeaseLost) break;
    }

    const auto transition = core::decide_transition(outcomes, event.attempt, max_attempts_, policy_,
                                                    std::chrono::system_clock::now(), unit_random());
    if (!transition) {
        // Counted once: by the heartbeat when it found the loss, else here (the fence found it).
        if (!work.flight->lost.exchange(true)) metrics_.leases_lost(1);
        log::warn("lease lost during the attempt; its result was discarded", {event.id, event.type, {}, event.attempt, "LEASE_LOST", {}});
        in_flight_.remove(work.flight->lease);
        return true;
    }
    if (transition->status == core::EventStatus::ReviewRequired) {
        log::error("event needs review", {event.id, event.type, {}, event.attempt, transition->error_code, {}});
    }
    work.flight->finishing = true;
    // A first-attempt completion needs no consumption rows: the status says it (see the
    // fence in handler_runner.cpp). Rows stay the record of partial progress.
    if (transition->status == core::EventStatus::Completed && event.attempt == 1) consumed_now.clear();
    completer_.submit(lease::Finish{work.flight->lease, *transition, std::move(consumed_now)});
    return true;
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
