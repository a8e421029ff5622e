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

}  // namespace outbox::dispatch
