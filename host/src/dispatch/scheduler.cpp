#include "dispatch/scheduler.hpp"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "dispatch/completer.hpp"
#include "lease/lease_store.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {
// How often a host with a free suspect lane looks for suspects while none were due; an
// idle host looks on every pass.
constexpr auto kSuspectCheckInterval = std::chrono::seconds{1};

std::vector<std::string> tokens_of(const std::vector<lease::LeaseRef>& leases) {
    std::vector<std::string> tokens;
    tokens.reserve(leases.size());
    for (const auto& lease : leases) tokens.push_back(lease.lease_token);
    return tokens;
}
}  // namespace

// What the scheduler's loop carries from one pass to the next.
struct Scheduler::Loop {
    Loop(const RuntimeOptions& options, db::OutageLog& outage, LoopObserver* observer)
        : session(options.database_url, "scheduler", outage),
          owner{options.host_id, options.incarnation},
          next_untracked_check(std::chrono::steady_clock::now() + options.rescue_interval()),
          recoveries_seen(outage.recoveries()),
          idle_wait(options.poll_interval) {
        if (observer) {
            if (const auto bound = observer->max_idle_wait()) idle_wait = std::min(idle_wait, *bound);
        }
    }

    db::DbSession session;
    const lease::LeaseOwner owner;
    // The first pass claims normal work before it looks for suspects: after a restart a
    // backlog may be waiting, and the suspect lane does not compete with it for the first
    // claim. From the second pass on, suspects are looked for as before.
    std::chrono::steady_clock::time_point next_suspect_check = std::chrono::steady_clock::now();
    bool first_pass = true;
    std::chrono::steady_clock::time_point next_pause_read = std::chrono::steady_clock::now();
    // Leases this process holds on the server but no longer tracks: a claim whose answer
    // was lost with its connection, or an outcome committed asynchronously and lost in a
    // failover. Left alone they would wait for lease_duration and the rescuer; the scheduler
    // gives them back itself, after every outage and at every rescue interval. It is the
    // only thread that claims, so no claim of its own is in flight meanwhile.
    std::optional<std::string> claiming_since;  // server time before this process's first claim
    lease::FairCursor fair;  // where the next normal claim starts among the companies
    std::chrono::steady_clock::time_point next_untracked_check;
    std::uint64_t recoveries_seen;
    // An idle pass waits at most this long, so the observer hears from the loop in time.
    std::chrono::milliseconds idle_wait;
    std::shared_ptr<const routing::HandlerSet> handlers;  // this pass's snapshot
};

// The event types one pass may claim: those of no paused handler.
struct Scheduler::Claimable {
    std::vector<std::string> types;
    std::vector<std::string> unthrottled;
    std::map<std::string, int> throttled;
};

void Scheduler::run(std::stop_token stop) {
    Loop loop(options_, outage_, observer_);
    while (!stop.stop_requested()) {
        if (observer_) observer_->loop_iterated();
        // One snapshot per pass: what is claimed is run by exactly these handlers, even if
        // the plugin directory changes meanwhile.
        loop.handlers = handlers_.get();
        if (!refresh_paused(loop, stop)) continue;
        if (!probe_breakers(loop, stop)) continue;
        const Claimable claimable = claimable_types(*loop.handlers);
        if (claimable.types.empty()) {
            wakeup_.wait_for(idle_wait(loop), stop);
            continue;
        }
        if (!release_untracked(loop, stop)) continue;
        if (!claim_suspect(loop, claimable.types, stop)) continue;
        const int free = free_slots();
        if (free <= 0 || (free < options_.batch_size && queue_.queued() > options_.concurrency / 2)) {
            wakeup_.wait_for(idle_wait(loop), stop);
            continue;
        }
        claim_normal(loop, claimable, free, stop);
    }
}

bool Scheduler::refresh_paused(Loop& loop, const std::stop_token& stop) {
    // Paused handlers: re-read on a NOTIFY or reconnect (the listener marks them stale)
    // and at every poll interval, the fallback when a notification is lost.
    if (paused_.take_stale() || !paused_.loaded() || std::chrono::steady_clock::now() >= loop.next_pause_read) {
        std::set<std::string> names;
        std::set<std::string> by_breaker;
        if (!loop.session.run(
                [&](pqxx::connection& conn) {
                    names.clear();
                    by_breaker.clear();
                    for (auto& paused : routing::read_paused_handlers(conn)) {
                        if (paused.circuit_open()) by_breaker.insert(paused.handler);
                        names.insert(std::move(paused.handler));
                    }
                },
                stop)) {
            paused_.mark_stale();
            return false;
        }
        breakers_.forget(names);
        paused_.set(std::move(names), std::move(by_breaker));
        loop.next_pause_read = std::chrono::steady_clock::now() + options_.poll_interval;
    }
    return true;
}

Scheduler::Claimable Scheduler::claimable_types(const routing::HandlerSet& handlers) const {
    const std::set<std::string> paused = paused_.get();
    const auto claimable = [&](const std::string& type) {
        const auto entries = handlers.for_type(type);
        return std::none_of(entries.begin(), entries.end(),
                            [&](const routing::HandlerEntry* entry) { return paused.contains(entry->name); });
    };
    Claimable result;
    if (paused.empty()) {
        result.types = handlers.event_types();
        result.unthrottled = handlers.unthrottled_types();
        result.throttled = handlers.throttled_types();
    } else {
        std::copy_if(handlers.event_types().begin(), handlers.event_types().end(), std::back_inserter(result.types),
                     claimable);
        std::copy_if(handlers.unthrottled_types().begin(), handlers.unthrottled_types().end(),
                     std::back_inserter(result.unthrottled), claimable);
        for (const auto& [type, budget] : handlers.throttled_types()) {
            if (claimable(type)) result.throttled.emplace(type, budget);
        }
    }
    return result;
}

bool Scheduler::release_untracked(Loop& loop, const std::stop_token& stop) {
    if (loop.claiming_since &&
        (outage_.recoveries() != loop.recoveries_seen || std::chrono::steady_clock::now() >= loop.next_untracked_check)) {
        const std::uint64_t recoveries = outage_.recoveries();
        int released = 0;
        if (!loop.session.run(
                [&](pqxx::connection& conn) {
                    released = lease::LeaseStore(conn).release_untracked(loop.owner, *loop.claiming_since,
                                                                         tokens_of(in_flight_.leases()));
                },
                stop)) {
            return false;
        }
        loop.recoveries_seen = recoveries;
        loop.next_untracked_check = std::chrono::steady_clock::now() + options_.rescue_interval();
        if (released > 0) {
            log::warn(std::to_string(released) +
                      " lease(s) of this host were no longer tracked (a claim's answer or a stored outcome was "
                      "lost with the database connection); released, the events run again");
        }
    }
    return true;
}

bool Scheduler::claim_suspect(Loop& loop, const std::vector<std::string>& types, const std::stop_token& stop) {
    // Suspects (a poison event may be among them) run one at a time in a lane of their
    // own, beside normal work: a crash then charges the suspect, and the rescuer gives
    // the events that ran beside it their attempt back (see LeaseStore::rescue_expired).
    const auto now = std::chrono::steady_clock::now();
    if (!loop.first_pass && queue_.suspect_lane_free() && (queue_.idle() || now >= loop.next_suspect_check)) {
        std::vector<lease::ClaimedEvent> claimed;
        const std::uint64_t started = spans_ ? telemetry::now_unix_nano() : 0;
        if (!loop.session.run(
                [&](pqxx::connection& conn) {
                    claimed = lease::LeaseStore(conn).claim(types, 1, loop.owner, options_.lease_duration,
                                                            lease::ClaimKind::Suspect);
                },
                stop)) {
            return false;
        }
        // While suspects are due, take the next as soon as the lane frees up.
        loop.next_suspect_check = claimed.empty() ? now + kSuspectCheckInterval : now;
        hand_out(loop, claimed, true, started);
    }
    return true;
}

int Scheduler::free_slots() const {
    // While workers still have plenty queued, wait for room for a whole batch: many tiny
    // claims cost the database more than a few full ones.
    // Outcomes waiting for the completer beyond one full batch hold room too: when
    // storing outcomes falls behind, claims slow down instead of piling up leases.
    // Up to a batch is normal pipelining (claims go on while outcomes are written).
    const int awaiting_outcome =
        static_cast<int>(in_flight_.size()) - queue_.queued() - queue_.busy();
    return queue_.free_slots() - std::max(0, awaiting_outcome - static_cast<int>(Completer::kMaxBatch));
}

void Scheduler::claim_normal(Loop& loop, const Claimable& claimable, int free, const std::stop_token& stop) {
    // The first claim takes only what the workers can start at once: a full batch (up to
    // 1,000 rows locked and updated in one statement) would hold every worker back
    // until it commits. A full first claim is followed by the next one at once.
    const int room = loop.first_pass ? std::min(free, std::max(1, options_.concurrency)) : free;
    loop.first_pass = false;
    std::vector<lease::ClaimedEvent> claimed;
    bool more_due = false;
    const std::uint64_t started = spans_ ? telemetry::now_unix_nano() : 0;
    const bool ok = loop.session.run(
        [&](pqxx::connection& conn) {
            lease::LeaseStore store(conn);
            if (!loop.claiming_since) loop.claiming_since = store.server_time();
            int left = room;
            const auto claim = [&](const std::vector<std::string>& claim_types, int limit) {
                if (limit <= 0 || claim_types.empty()) return;
                auto got = store.claim(claim_types, limit, loop.owner, options_.lease_duration,
                                       lease::ClaimKind::Normal, &options_.tenants, &loop.fair);
                more_due = more_due || loop.fair.more_due;
                left -= static_cast<int>(got.size());
                for (auto& item : got) claimed.push_back(std::move(item));
            };
            claim(claimable.unthrottled, std::min(left, options_.batch_size));
            for (const auto& [type, budget] : claimable.throttled) {
                claim({type}, std::min({left, options_.batch_size, budget - queue_.in_flight_of(type)}));
            }
        },
        stop);
    // Claims that committed before a later one failed are still ours: hand them out.
    hand_out(loop, claimed, false, started);
    if (!ok) return;
    // A full claim means more may be due right now; otherwise wait for a wake-up.
    if (!more_due) wakeup_.wait_for(idle_wait(loop), stop);
}

bool Scheduler::probe_breakers(Loop& loop, const std::stop_token& stop) {
    const std::set<std::string> open = paused_.by_breaker();
    if (open.empty()) return true;
    for (const auto& entry : loop.handlers->entries()) {
        if (!open.contains(entry.name) || std::chrono::steady_clock::now() < breakers_.next_probe_try(entry.name)) {
            continue;
        }
        if (free_slots() <= 0) return true;  // tried again when a worker frees a slot
        if (!probe_breaker(loop, entry, stop)) return false;
    }
    return true;
}

bool Scheduler::probe_breaker(Loop& loop, const routing::HandlerEntry& entry, const std::stop_token& stop) {
    // The probe's event: one of a type of this handler that no other paused handler holds.
    const std::set<std::string> paused = paused_.get();
    std::vector<std::string> types;
    for (const auto& type : entry.event_types) {
        const auto entries = loop.handlers->for_type(type);
        if (std::none_of(entries.begin(), entries.end(), [&](const routing::HandlerEntry* other) {
                return other != &entry && paused.contains(other->name);
            })) {
            types.push_back(type);
        }
    }
    // Held through a wait for a fleet slot (up to the timeout) and the call itself (up to the
    // timeout and the grace before it is abandoned); a host that dies holds it no longer.
    const auto hold = 2 * entry.settings.timeout + options_.abandon_grace + std::chrono::seconds{5};
    CircuitBreakers::TakeResult taken;
    std::vector<lease::ClaimedEvent> claimed;
    const std::uint64_t started = spans_ ? telemetry::now_unix_nano() : 0;
    if (!loop.session.run(
            [&](pqxx::connection& conn) {
                claimed.clear();
                taken = breakers_.take_probe(conn, entry.name, hold);
                if (!taken.token) return;
                lease::LeaseStore store(conn);
                if (!loop.claiming_since) loop.claiming_since = store.server_time();
                if (!types.empty()) {
                    claimed = store.claim(types, 1, loop.owner, options_.lease_duration, lease::ClaimKind::Normal,
                                          &options_.tenants, &loop.fair);
                }
                if (claimed.empty()) breakers_.release_probe(conn, entry.name, *taken.token);
            },
            stop)) {
        return false;
    }
    const auto now = std::chrono::steady_clock::now();
    if (claimed.empty()) {
        // Not due yet (try when the database says it may be, re-reading at least every poll
        // interval), or nothing to call: a new event wakes the scheduler up anyway.
        const auto wait = taken.token ? options_.poll_interval : taken.due_in.value_or(options_.poll_interval);
        breakers_.set_next_probe_try(entry.name,
                                     now + std::min(std::max(wait, std::chrono::milliseconds{10}), options_.poll_interval));
        return true;
    }
    breakers_.set_next_probe_try(entry.name, now + hold);
    auto probe = std::make_shared<Probe>();
    probe->handler = entry.name;
    probe->token = *taken.token;
    log::info("circuit breaker probe: one call after the cool-down", {.event_id = claimed.front().event.id,
                                                                      .event_type = claimed.front().event.type,
                                                                      .handler = entry.name});
    hand_out(loop, claimed, false, started, std::move(probe));
    return true;
}

std::chrono::milliseconds Scheduler::idle_wait(const Loop& loop) const {
    std::chrono::milliseconds wait = loop.idle_wait;
    const std::set<std::string> open = paused_.by_breaker();
    if (open.empty() || !loop.handlers) return wait;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& entry : loop.handlers->entries()) {
        if (!open.contains(entry.name)) continue;
        // One due already was tried this pass, or waits for a free slot (a freed slot wakes
        // the scheduler).
        const auto due = std::chrono::ceil<std::chrono::milliseconds>(breakers_.next_probe_try(entry.name) - now);
        if (due.count() > 0) wait = std::min(wait, due);
    }
    return wait;
}

// `started`: when the claim began (telemetry::now_unix_nano()), for its span.
void Scheduler::hand_out(const Loop& loop, std::vector<lease::ClaimedEvent>& claimed, bool suspect,
                         std::uint64_t started, std::shared_ptr<Probe> probe) {
    if (claimed.empty()) return;
    metrics_.events_claimed(claimed.size());
    if (spans_) spans_->record(telemetry::claim_span(started, claimed.size(), suspect));
    std::vector<Work> work;
    work.reserve(claimed.size());
    for (auto& item : claimed) {
        auto flight = in_flight_.add(lease::LeaseRef{item.event.id, item.lease_token}, item.event.type,
                                     item.event.attempt, suspect);
        work.push_back(Work{std::move(item), std::move(flight), loop.handlers, suspect, probe});
    }
    queue_.push(std::move(work));
}

}  // namespace outbox::dispatch
