#include "dispatch/completer.hpp"

#include <unordered_set>

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
}  // namespace

Completer::Completer(std::string url, db::OutageLog& outage, InFlightTable& in_flight, metrics::Metrics& metrics,
                     db::Wakeup& wakeup)
    : url_(std::move(url)), outage_(outage), in_flight_(in_flight), metrics_(metrics), wakeup_(wakeup) {}

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
            written = session.run(
                [&](pqxx::connection& conn) {
                    lease::LeaseStore store(conn);
                    flush(batch, store);
                },
                never.get_token());
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

void Completer::flush(std::vector<lease::Finish>& batch, lease::LeaseStore& store) {
    const std::vector<std::string> applied = store.finish(batch);
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
