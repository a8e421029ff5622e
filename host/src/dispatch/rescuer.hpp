#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "db/outage_log.hpp"
#include "metrics/metrics.hpp"

namespace outbox::dispatch {

/// Finds PROCESSING rows whose lease expired (their host died or froze) and makes them
/// claimable again, or REVIEW_REQUIRED when their attempts are used up. Any host may do
/// it; SKIP LOCKED splits the work.
class Rescuer {
public:
    Rescuer(std::string url, db::OutageLog& outage, metrics::Metrics& metrics, int max_attempts,
            std::chrono::milliseconds interval, bool record_attempts = true)
        : url_(std::move(url)), outage_(outage), metrics_(metrics), max_attempts_(max_attempts), interval_(interval),
          record_attempts_(record_attempts) {}

    void run(std::stop_token stop);

private:
    std::string url_;
    db::OutageLog& outage_;
    metrics::Metrics& metrics_;
    int max_attempts_;
    std::chrono::milliseconds interval_;
    bool record_attempts_;  // outbox_attempt rows for lost attempts (outbox.attempt_history not off)
};

}  // namespace outbox::dispatch
