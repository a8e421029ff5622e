#include "dispatch/heartbeat.hpp"

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {

void Heartbeat::run(std::stop_token stop) {
    db::DbSession session(url_, "heartbeat", outage_);
    while (db::sleep_for(interval_, stop)) {
        const std::vector<lease::LeaseRef> leases = in_flight_.leases();
        if (leases.empty()) continue;
        session.run(
            [&](pqxx::connection& conn) {
                lease::LeaseStore store(conn);
                const std::vector<std::string> kept = store.extend(leases, lease_);
                const int lost = in_flight_.mark_lost_except(leases, kept);
                if (lost > 0) {
                    metrics_.leases_lost(static_cast<std::uint64_t>(lost));
                    log::warn(std::to_string(lost) + " lease(s) lost to another host; their attempts are cancelled");
                }
            },
            stop);
    }
}

}  // namespace outbox::dispatch
