#pragma once

#include <chrono>
#include <stop_token>
#include <string>

#include "db/outage_log.hpp"

namespace outbox::dispatch {

/// Keeps blocked successors out of the claim's walk (review F8): every `interval` it parks
/// PENDING events held back by an earlier event of their aggregate (LeaseStore::park_blocked),
/// and every `sweep_interval` it releases parked events nothing holds back any more
/// (LeaseStore::release_parked). Any host may do it; both statements are safe side by side.
class Parker {
public:
    Parker(std::string url, db::OutageLog& outage, std::chrono::milliseconds interval,
           std::chrono::milliseconds sweep_interval)
        : url_(std::move(url)), outage_(outage), interval_(interval), sweep_interval_(sweep_interval) {}

    void run(std::stop_token stop);

    /// Due rows one parking statement reads.
    static constexpr int kWindow = 2000;

private:
    std::string url_;
    db::OutageLog& outage_;
    std::chrono::milliseconds interval_;
    std::chrono::milliseconds sweep_interval_;
};

}  // namespace outbox::dispatch
