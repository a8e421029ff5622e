#include "dispatch/completer.hpp"

#include <string_view>
#include <unordered_set>

#include "db/db_error.hpp"
#include "db/db_session.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {
metrics::Metrics::Outcome outcome_of(core::EventStatus status) {
    switch (status) {
        case core::EventStatus::Completed: return metrics::Metrics::Outcome::Completed;
        case core::EventStatus::RetryWait: return metrics::Metrics::Outcome::Retry;
        default: return metrics::Metrics::Outcome::ReviewRequired;
    }
}

// Errors the same statement meets again however often it is retried: bad data, a constraint,
// a trigger's exception, a missing right. Resource shortages (53), lock timeouts (55) and
// server faults (58, XX) pass, so their batches wait and are written whole.
bool refused_by_the_data(const db::DbFailure& failure) {
    if (failure.kind != db::DbFailureKind::Sql || failure.sqlstate.size() != 5) return false;
    const std::string_view cls = std::string_view(failure.sqlstate).substr(0, 2);
    for (const std::string_view refusing : {"22", "23", "27", "2F", "39", "42", "P0"}) {
        if (cls == refusing) return true;
    }
    return false;
}
}  // namespace

Completer::Completer(std::string url, db::OutageLog& outage, InFlightTable& in_flight, metrics::Metrics& metrics,
                     db::Wakeup& wakeup, std::string host)
    : url_(std::move(url)), outage_(outage), in_flight_(in_flight), metrics_(metrics), wakeup_(wakeup),
      host_(std::move(host)) {}

void Completer::submit(lease::Finish finish) {
    {
        std::lock_guard lock(mutex_);
        pending_.push_back(std::move(finish));
    }
    changed_.notify_all();
}

void Completer::run(std::stop_token stop, std::chrono::milliseconds give_up_after) {
    db::DbSession session(url_, "completer", outage_);
    std::optional<std::chrono::steady_clock::time_point> give_up_at;
    std::stop_source never;  // the completer's own waits must outlive the stop request
    while (true) {
        std::vector<lease::Finish> batch;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, stop, [&] { return !pending_.empty(); });
            if (pending_.empty()) {
                if (stop.stop_requested()) return;
                continue;
            }
            const std::size_t n = std::min(pending_.size(), kMaxBatch);
            batch.assign(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.begin() + n));
            pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
            writing_ = true;
        }
        bool written = false;
        while (!written) {
            bool refused = false;
            written = session.run(
                [&](pqxx::connection& conn) {
                    lease::LeaseStore store(conn);
                    try {
                        flush(batch, store);
                    } catch (...) {
                        refused = refused_by_the_data(db::classify_db_error(std::current_exception()));
                        throw;
                    }
                },
                never.get_token());
            if (!written && refused) written = isolate(batch);
            if (!written && stop.stop_requested()) {
                if (!give_up_at) give_up_at = std::chrono::steady_clock::now() + give_up_after;
                if (std::chrono::steady_clock::now() >= *give_up_at) {
                    log::error("could not store " + std::to_string(batch.size()) +
                               " attempt outcomes before exit; their leases will expire and the events will be retried");
                    for (const auto& item : batch) in_flight_.remove(item.lease);
                    std::lock_guard lock(mutex_);
                    pending_.clear();
                    writing_ = false;
                    changed_.notify_all();
                    return;
                }
            }
        }
        {
            std::lock_guard lock(mutex_);
            writing_ = false;
        }
        changed_.notify_all();
        wakeup_.notify();
    }
}

// The database refused the statement itself (a constraint, a trigger, a bug), so writing the
// same batch again fails again, and the heartbeat would keep every lease in it alive while the
// host stores nothing. The batch is halved, the rest queued first, until the refused outcome
// is alone; that one is given up (its lease expires and the rescuer retries the event) and the
// others are stored (correctness review F10).
bool Completer::isolate(std::vector<lease::Finish>& batch) {
    if (batch.size() > 1) {
        const auto half = batch.begin() + static_cast<std::ptrdiff_t>(batch.size() / 2);
        std::lock_guard lock(mutex_);
        pending_.insert(pending_.begin(), std::make_move_iterator(half), std::make_move_iterator(batch.end()));
        batch.erase(half, batch.end());
        return false;
    }
    const auto& item = batch.front();
    log::error("the database refused this attempt's outcome on its own; it is not stored, and the event runs again once "
               "its lease expires",
               {.event_id = item.lease.event_id});
    metrics_.outcomes_refused(1);
    in_flight_.remove(item.lease);
    return true;
}

void Completer::flush(std::vector<lease::Finish>& batch, lease::LeaseStore& store) {
    const std::vector<std::string> applied = store.finish(batch, host_);
    const std::unordered_set<std::string> stored(applied.begin(), applied.end());
    std::uint64_t lost = 0;
    for (const auto& item : batch) {
        if (stored.contains(item.lease.lease_token)) {
            metrics_.event_outcome(outcome_of(item.transition.status));
        } else {
            ++lost;
            log::warn("lease lost before the outcome was stored; another host owns the event now",
                      {.event_id = item.lease.event_id});
        }
        in_flight_.remove(item.lease);
    }
    if (lost > 0) metrics_.leases_lost(lost);
}

bool Completer::wait_drained(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    std::stop_source never;
    return changed_.wait_until(lock, never.get_token(), deadline, [&] { return pending_.empty() && !writing_; });
}

}  // namespace outbox::dispatch
