#pragma once

#include <map>
#include <optional>
#include <string>

#include "metrics/metrics.hpp"

namespace outbox::metrics {

/// Gauges read from the database at scrape time (shared by every host of the fleet).
struct DbGauges {
    /// Events per status, for every status except COMPLETED and DISCARDED (what is not done yet).
    std::map<std::string, long long> backlog;
    /// Age (now - occurred_at, or - deliver_after when later) of the oldest unfinished event
    /// (PENDING, RETRY_WAIT whether due or not, PROCESSING); 0 when none. A delayed event not
    /// due yet adds nothing.
    double oldest_delay_seconds = 0;
    /// Age of the oldest REVIEW_REQUIRED event; 0 when none.
    double oldest_review_seconds = 0;
    /// PENDING or RETRY_WAIT events held back by an earlier unfinished or reviewed event of
    /// the same aggregate.
    long long blocked = 0;
    /// Per loaded handler: the same for events of a type it supports and has not consumed.
    std::map<std::string, double> handler_oldest_delay_seconds;
    /// Hosts in the fleet registry by state (live, stopped, gone).
    std::map<std::string, long long> fleet_hosts;
    /// This host's handlers and every handler paused fleet-wide: paused or not.
    std::map<std::string, bool> handler_paused;
    /// This host's handlers with a circuit breaker and every handler an open breaker paused:
    /// open or not.
    std::map<std::string, bool> circuit_open;
    /// Event types whose handler sets differ between live hosts.
    long long fleet_handler_mismatches = 0;
    /// Per handler with a max_concurrency: fleet slots taken and not expired, by any host
    /// (a slot of an abandoned call stays taken until the call returns).
    std::map<std::string, long long> handler_slots_taken;
};

struct HostInfo {
    std::string host_id;
    std::string version;
};

/// Prometheus text exposition format 0.0.4 of this host's counters and, when the scrape's
/// database query succeeded, the database gauges (`outbox_database_up` says which).
std::string render_prometheus(const Metrics& metrics, const std::optional<DbGauges>& gauges, const HostInfo& host);

/// Content-Type of render_prometheus' output.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace outbox::metrics
