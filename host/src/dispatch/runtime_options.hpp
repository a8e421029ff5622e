#pragma once

#include <chrono>
#include <string>

#include "config/config.hpp"

namespace outbox::dispatch {

/// What the worker runtime needs from the configuration.
struct RuntimeOptions {
    std::string database_url;
    int pool_size = 4;
    std::string host_id;
    bool enabled = true;
    std::chrono::milliseconds poll_interval{1000};
    int batch_size = 20;
    std::chrono::milliseconds lease_duration{300'000};
    int max_attempts = 8;
    std::chrono::milliseconds initial_backoff{1000};
    std::chrono::milliseconds max_backoff{300'000};
    int concurrency = 8;
    std::chrono::milliseconds shutdown_timeout{30'000};

    static RuntimeOptions from(const config::Config& config, const std::string& host_id);
    /// A third of the lease: two missed beats still leave the lease valid.
    [[nodiscard]] std::chrono::milliseconds heartbeat_interval() const { return lease_duration / 3; }
    /// Half the lease, at most 30s: an expired lease is noticed within that.
    [[nodiscard]] std::chrono::milliseconds rescue_interval() const {
        return std::min<std::chrono::milliseconds>(lease_duration / 2, std::chrono::seconds{30});
    }
};

}  // namespace outbox::dispatch
