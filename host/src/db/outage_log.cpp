#include "db/outage_log.hpp"

#include "log/log.hpp"

namespace outbox::db {

void OutageLog::failed(const std::string& component, const DbFailure& failure) {
    std::lock_guard lock(mutex_);
    if (down_) return;
    down_ = true;
    since_ = std::chrono::steady_clock::now();
    log::error("database unavailable (noticed by " + component + "): " + failure.describe() + "; retrying with backoff");
}

void OutageLog::succeeded(std::chrono::steady_clock::time_point connected_at) {
    std::lock_guard lock(mutex_);
    if (!down_ || connected_at < since_) return;
    down_ = false;
    ++recoveries_;
    const auto seconds =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since_).count() / 1000.0;
    log::info("database reachable again after " + std::to_string(seconds) + "s");
}

}  // namespace outbox::db
