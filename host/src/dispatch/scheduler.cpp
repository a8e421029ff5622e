#include "dispatch/scheduler.hpp"

#include <algorithm>

namespace outbox::dispatch {

void Scheduler::run(std::stop_token stop) {
    DbSession session(options_.database_url, "scheduler", outage_);
    while (!stop.stop_requested()) {
        const int free = queue_.free_slots();
        if (free <= 0 || handlers_->event_types().empty()) {
            wakeup_.wait_for(options_.poll_interval, stop);
            continue;
        }
        const int limit = std::min(free, options_.batch_size);
        std::vector<lease::ClaimedEvent> claimed;
        const bool ok = session.run(
            [&](pqxx::connection& conn) {
                lease::LeaseStore store(conn);
                claimed = store.claim(handlers_->event_types(), limit, options_.host_id, options_.lease_duration);
            },
            stop);
        if (!ok) continue;
        const auto got = static_cast<int>(claimed.size());
        if (got > 0) {
            metrics_.events_claimed(static_cast<std::uint64_t>(got));
            std::vector<Work> work;
            work.reserve(claimed.size());
            for (auto& item : claimed) {
                auto flight = in_flight_.add(lease::LeaseRef{item.event.id, item.lease_token});
                work.push_back(Work{std::move(item), std::move(flight), handlers_});
            }
            queue_.push(std::move(work));
        }
        // A full claim means more may be due right now; otherwise wait for a wake-up.
        if (got < limit) wakeup_.wait_for(options_.poll_interval, stop);
    }
}

}  // namespace outbox::dispatch
