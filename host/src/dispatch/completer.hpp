#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <vector>

#include "db/outage_log.hpp"
#include "db/db_session.hpp"
#include "dispatch/in_flight.hpp"
#include "lease/lease_store.hpp"
#include "metrics/metrics.hpp"

namespace outbox::dispatch {

/// Persists attempt outcomes in batches: whatever accumulated while the previous batch was
/// being written goes out as one statement (group commit), so a handler that never used
/// ctx.db() costs no commit of its own. An event stays in the in-flight table (and keeps
/// its lease extended) until its outcome is stored.
class Completer {
public:
    /// The most outcomes one statement stores.
    static constexpr std::size_t kMaxBatch = 1000;

    /// `wakeup` is poked after every stored batch: the scheduler counts outcomes waiting
    /// here against its room to claim.
    /// `host` is recorded as the host of the attempts' outbox_attempt rows.
    Completer(std::string url, db::OutageLog& outage, InFlightTable& in_flight, metrics::Metrics& metrics,
              db::Wakeup& wakeup, std::string host = {});

    void submit(lease::Finish finish);

    /// Runs until stop is requested and everything submitted is written, or until
    /// `give_up_after` passed since the stop while the database stays unreachable (those
    /// leases then expire and the events are retried: at-least-once still holds).
    void run(std::stop_token stop, std::chrono::milliseconds give_up_after);

    /// Waits until nothing is pending; false on timeout. For tests and shutdown.
    bool wait_drained(std::chrono::steady_clock::time_point deadline);

private:
    void flush(std::vector<lease::Finish>& batch, lease::LeaseStore& store);
    bool isolate(std::vector<lease::Finish>& batch);

    std::string url_;
    db::OutageLog& outage_;
    InFlightTable& in_flight_;
    metrics::Metrics& metrics_;
    db::Wakeup& wakeup_;
    std::string host_;
    std::mutex mutex_;
    std::condition_variable_any changed_;
    std::vector<lease::Finish> pending_;
    bool writing_ = false;
};

}  // namespace outbox::dispatch
