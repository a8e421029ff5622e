#pragma once

#include <atomic>

#include "core/retry_policy.hpp"
#include "db/connection_pool.hpp"
#include "dispatch/completer.hpp"
#include "dispatch/fleet_limiter.hpp"
#include "dispatch/in_flight.hpp"
#include "dispatch/work_queue.hpp"
#include "metrics/metrics.hpp"

namespace outbox::dispatch {

/// Runs every handler of one claimed event that has not consumed it yet, folds their
/// outcomes into the event's next state and hands that to the completer.
class Worker {
public:
    Worker(db::ConnectionPool& pool, Completer& completer, InFlightTable& in_flight, FleetLimiter& limiter,
           metrics::Metrics& metrics, const std::atomic<bool>& stopping, const std::atomic<bool>& hard_stop,
           core::RetryPolicy policy, int max_attempts)
        : pool_(pool), completer_(completer), in_flight_(in_flight), limiter_(limiter), metrics_(metrics),
          stopping_(stopping), hard_stop_(hard_stop), policy_(policy), max_attempts_(max_attempts) {}

    void process(const Work& work);

private:
    /// Gives the event back without counting the attempt (host stopping before a call).
    void release(const Work& work);

    db::ConnectionPool& pool_;
    Completer& completer_;
    InFlightTable& in_flight_;
    FleetLimiter& limiter_;
    metrics::Metrics& metrics_;
    const std::atomic<bool>& stopping_;
    const std::atomic<bool>& hard_stop_;
    core::RetryPolicy policy_;
    int max_attempts_;
};

}  // namespace outbox::dispatch
