#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "db/outage_log.hpp"
#include "dispatch/in_flight.hpp"
#include "metrics/metrics.hpp"

namespace outbox::dispatch {

/// Extends the leases of every in-flight event every `interval` (a third of the lease, so
/// two beats may fail before a lease can expire). A lease that could not be extended was
/// taken over: its attempt is cancelled through ctx.cancelled() and its result discarded.
class Heartbeat {
public:
    Heartbeat(std::string url, db::OutageLog& outage, InFlightTable& in_flight, metrics::Metrics& metrics,
              std::chrono::milliseconds lease, std::chrono::milliseconds interval)
        : url_(std::move(url)), outage_(outage), in_flight_(in_flight), metrics_(metrics), lease_(lease),
          interval_(interval) {}

    void run(std::stop_token stop);

private:
    std::string url_;
    db::OutageLog& outage_;
    InFlightTable& in_flight_;
    metrics::Metrics& metrics_;
    std::chrono::milliseconds lease_;
    std::chrono::milliseconds interval_;
};

/// Finds PROCESSING rows whose lease expired (their host died or froze) and makes them
/// claimable again, or REVIEW_REQUIRED when their attempts are used up. Any host may do
/// it; SKIP LOCKED splits the work.
class Rescuer {
public:
    Rescuer(std::string url, db::OutageLog& outage, metrics::Metrics& metrics, int max_attempts,
            std::chrono::milliseconds interval)
        : url_(std::move(url)), outage_(outage), metrics_(metrics), max_attempts_(max_attempts), interval_(interval) {}

    void run(std::stop_token stop);

private:
    std::string url_;
    db::OutageLog& outage_;
    metrics::Metrics& metrics_;
    int max_attempts_;
    std::chrono::milliseconds interval_;
};

}  // namespace outbox::dispatch
