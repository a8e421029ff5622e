#include "dispatch/rescuer.hpp"

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {

void Rescuer::run(std::stop_token stop) {
    db::DbSession session(url_, "rescuer", outage_);
    constexpr int kBatch = 500;
    while (db::sleep_for(interval_, stop)) {
        int moved = kBatch;
        while (moved == kBatch && !stop.stop_requested()) {
            moved = 0;
            session.run(
                [&](pqxx::connection& conn) {
                    lease::LeaseStore store(conn);
                    moved = store.rescue_expired(max_attempts_, kBatch, record_attempts_);
                },
                stop);
            if (moved > 0) {
                metrics_.events_rescued(static_cast<std::uint64_t>(moved));
                metrics_.event_outcome(metrics::Metrics::Outcome::WorkerLost, static_cast<std::uint64_t>(moved));
                log::warn(std::to_string(moved) + " event(s) found with an expired lease; made claimable again",
                          {.code = "WORKER_LOST"});
            }
        }
    }
}

}  // namespace outbox::dispatch
