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
        std::vector<lease::ClaimedEvent> claimed;
        bool more_due = false;
        const bool ok = session.run(
            [&](pqxx::connection& conn) {
                lease::LeaseStore store(conn);
                int left = free;
                const auto claim = [&](const std::vector<std::string>& types, int limit) {
                    if (limit <= 0 || types.empty()) return;
                    auto got = store.claim(types, limit, options_.host_id, options_.lease_duration);
                    more_due = more_due || static_cast<int>(got.size()) == limit;
                    left -= static_cast<int>(got.size());
                    for (auto& item : got) claimed.push_back(std::move(item));
                };
                claim(handlers_->unthrottled_types(), std::min(left, options_.batch_size));
                for (const auto& [type, budget] : handlers_->throttled_types()) {
                    claim({type}, std::min({left, options_.batch_size, budget - queue_.in_flight_of(type)}));
                }
            },
            stop);
        // Claims that committed before a later one failed are still ours: hand them out.
        if (!ok && claimed.empty()) continue;
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
        if (!more_due) wakeup_.wait_for(options_.poll_interval, stop);
    }
}

}  // namespace outbox::dispatch
