#include "dispatch/parker.hpp"

#include "db/db_session.hpp"
#include "lease/lease_store.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {

void Parker::run(std::stop_token stop) {
    db::DbSession session(url_, "parker", outage_);
    auto last_sweep = std::chrono::steady_clock::now();
    while (db::sleep_for(interval_, stop)) {
        // A front made mostly of blocked events is parked statement after statement, each
        // one short; a front of claimable work ends the pass.
        int parked = 0;
        lease::ParkPass pass{kWindow, kWindow};
        for (int i = 0; i < 1000 && pass.parked * 2 >= kWindow && !stop.stop_requested(); ++i) {
            session.run([&](pqxx::connection& conn) { pass = lease::LeaseStore(conn).park_blocked(kWindow, interval_); },
                        stop);
            parked += pass.parked;
        }
        if (parked > 0) log::debug("parked " + std::to_string(parked) + " event(s) held back by their aggregate");
        if (std::chrono::steady_clock::now() - last_sweep >= sweep_interval_ && !stop.stop_requested()) {
            last_sweep = std::chrono::steady_clock::now();
            int released = 0;
            session.run([&](pqxx::connection& conn) { released = lease::LeaseStore(conn).release_parked(); }, stop);
            if (released > 0) {
                log::info(std::to_string(released) +
                          " parked event(s) found at the head of their aggregate; released by the sweep");
            }
        }
    }
}

}  // namespace outbox::dispatch
