#pragma once

#include <algorithm>
#include <chrono>
#include <string>

#include "config/config.hpp"
#include "lease/lease_store.hpp"

namespace outbox::dispatch {

/// What the worker runtime needs from the configuration: the outbox.* settings as declared
/// in config::Config (so a new setting is declared once), plus the database and identity.
struct RuntimeOptions : config::Config::Outbox {
    std::string database_url;
    std::string session_url;  // database.session_url: LISTEN goes there when set
    int pool_size = 4;
    /// telemetry.*: with an OTLP endpoint the runtime exports spans of calls and claims.
    config::Config::Telemetry telemetry;
    /// tenants.*: each claim's share per company and the fleet-wide caps.
    lease::TenantShares tenants;
    /// This process's own: its claims record it, and only its own untracked leases are released.
    std::string incarnation = lease::new_incarnation();

    static RuntimeOptions from(const config::Config& config, const std::string& host_id);
    /// A third of the lease: two missed beats still leave the lease valid.
    [[nodiscard]] std::chrono::milliseconds heartbeat_interval() const { return lease_duration / 3; }
    /// Half the lease, at most 30s: an expired lease is noticed within that.
    [[nodiscard]] std::chrono::milliseconds rescue_interval() const {
        return std::min<std::chrono::milliseconds>(lease_duration / 2, std::chrono::seconds{30});
    }
    /// How often blocked successors are parked: the poll interval, within 100ms..2s. An
    /// event parked behind its aggregate has waited at least this long.
    [[nodiscard]] std::chrono::milliseconds park_interval() const {
        return std::clamp<std::chrono::milliseconds>(poll_interval, std::chrono::milliseconds{100},
                                                     std::chrono::seconds{2});
    }
    [[nodiscard]] int abandoned_thread_limit() const { return max_abandoned_threads.value_or(concurrency); }
};

}  // namespace outbox::dispatch
