#include "metrics/prometheus.hpp"

#include <algorithm>

#include <array>
#include <cmath>
#include <charconv>

namespace outbox::metrics {
namespace {

std::string escape_label(const std::string& value) {
    std::string out;
    out.reserve(value.size());
    for (const char c : value) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string number(double value) {
    if (std::isnan(value)) return "NaN";
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    // Shortest text that reads back as the same double: bucket bounds print as written.
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
    return std::string(buffer, result.ptr);
}

class Writer {
public:
    void family(const char* name, const char* type, const char* help) {
        out_ += "# HELP ";
        out_ += name;
        out_ += ' ';
        out_ += help;
        out_ += "\n# TYPE ";
        out_ += name;
        out_ += ' ';
        out_ += type;
        out_ += '\n';
    }
    void sample(const std::string& name, const std::map<std::string, std::string>& labels, const std::string& value) {
        out_ += name;
        if (!labels.empty()) {
            out_ += '{';
            bool first = true;
            for (const auto& [key, label] : labels) {
                if (!first) out_ += ',';
                first = false;
                out_ += key + "=\"" + escape_label(label) + '"';
            }
            out_ += '}';
        }
        out_ += ' ';
        out_ += value;
        out_ += '\n';
    }
    void sample(const std::string& name, const std::map<std::string, std::string>& labels, std::uint64_t value) {
        sample(name, labels, std::to_string(value));
    }
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

/// Fleet-wide gauges, read from the database at this scrape.
void write_database_gauges(Writer& w, const DbGauges& gauges) {
    w.family("outbox_publications_backlog", "gauge", "Events not finished (neither COMPLETED nor DISCARDED), by status (fleet-wide, from the database).");
    for (const auto& [status, count] : gauges.backlog) {
        w.sample("outbox_publications_backlog", {{"status", status}}, std::to_string(count));
    }
    w.family("outbox_publications_oldest_delay_seconds", "gauge",
             "Age of the oldest unfinished event: PENDING, RETRY_WAIT (due or not) or PROCESSING (fleet-wide); "
             "per handler: of a type it supports and has not consumed.");
    w.sample("outbox_publications_oldest_delay_seconds", {}, number(gauges.oldest_delay_seconds));
    for (const auto& [handler, delay] : gauges.handler_oldest_delay_seconds) {
        w.sample("outbox_publications_oldest_delay_seconds", {{"handler", handler}}, number(delay));
    }
    w.family("outbox_handler_paused", "gauge",
             "1 while the handler is paused fleet-wide (outboxd handlers pause), else 0; this host's handlers "
             "and every paused one.");
    for (const auto& [handler, paused] : gauges.handler_paused) {
        w.sample("outbox_handler_paused", {{"handler", handler}}, paused ? "1" : "0");
    }
    w.family("outbox_circuit_open", "gauge",
             "1 while the handler's circuit breaker is open (it paused the handler fleet-wide), else 0; this "
             "host's handlers with a breaker and every open one.");
    for (const auto& [handler, open] : gauges.circuit_open) {
        w.sample("outbox_circuit_open", {{"handler", handler}}, open ? "1" : "0");
    }
    w.family("outbox_handler_slots_taken", "gauge",
             "Fleet concurrency slots (max_concurrency) taken and not expired, by any host; a slot of an "
             "abandoned call stays taken until the call returns.");
    for (const auto& [handler, taken] : gauges.handler_slots_taken) {
        w.sample("outbox_handler_slots_taken", {{"handler", handler}}, std::to_string(taken));
    }
    w.family("outbox_publications_oldest_review_seconds", "gauge",
             "Age of the oldest REVIEW_REQUIRED event (fleet-wide); 0 when none waits for an operator.");
    w.sample("outbox_publications_oldest_review_seconds", {}, number(gauges.oldest_review_seconds));
    w.family("outbox_publications_blocked", "gauge",
             "Waiting events held back by an earlier unfinished or REVIEW_REQUIRED event of their aggregate.");
    w.sample("outbox_publications_blocked", {}, std::to_string(gauges.blocked));
    w.family("outbox_fleet_hosts", "gauge", "Hosts in the fleet registry, by state (live, stopped, gone).");
    for (const auto& [state, count] : gauges.fleet_hosts) {
        w.sample("outbox_fleet_hosts", {{"state", state}}, std::to_string(count));
    }
    w.family("outbox_fleet_handler_mismatches", "gauge",
             "Event types whose handler sets differ between live hosts (see GET /api/v1/admin/fleet).");
    w.sample("outbox_fleet_handler_mismatches", {}, std::to_string(gauges.fleet_handler_mismatches));
}

/// Outcomes and handler calls of this host.
void write_outcomes_and_calls(Writer& w, const Metrics& metrics) {
    w.family("outbox_publications_processed_total", "counter",
             "Event attempt outcomes stored by this host, expired attempts its rescuer recovered (worker_lost) and "
             "events discarded through its admin API.");
    constexpr std::array<std::pair<Metrics::Outcome, const char*>, 5> kOutcomes{{
        {Metrics::Outcome::Completed, "completed"},
        {Metrics::Outcome::Retry, "retry"},
        {Metrics::Outcome::ReviewRequired, "review_required"},
        {Metrics::Outcome::WorkerLost, "worker_lost"},
        {Metrics::Outcome::Discarded, "discarded"},
    }};
    for (const auto& [outcome, label] : kOutcomes) {
        w.sample("outbox_publications_processed_total", {{"result", label}}, metrics.outcome_count(outcome));
    }

    w.family("outbox_handler_calls_total", "counter", "Handler calls made by this host, by handler and result.");
    for (const auto& [key, count] : metrics.handler_calls()) {
        w.sample("outbox_handler_calls_total", {{"handler", key.first}, {"result", key.second}}, count);
    }

    w.family("outbox_circuit_openings_total", "counter",
             "Circuit breakers this host opened (paused the handler fleet-wide), by handler.");
    for (const auto& [handler, count] : metrics.circuit_openings()) {
        w.sample("outbox_circuit_openings_total", {{"handler", handler}}, count);
    }
    w.family("outbox_circuit_probes_total", "counter",
             "Probe calls of an open circuit breaker made by this host, by handler and result (success, failure).");
    for (const auto& [key, count] : metrics.circuit_probes()) {
        w.sample("outbox_circuit_probes_total", {{"handler", key.first}, {"result", key.second}}, count);
    }

    w.family("outbox_handler_duration_seconds", "histogram", "Duration of handler calls made by this host.");
    for (const auto& [handler, histogram] : metrics.handler_durations()) {
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < kDurationBuckets.size(); ++i) {
            cumulative += histogram.buckets[i];
            w.sample("outbox_handler_duration_seconds_bucket", {{"handler", handler}, {"le", number(kDurationBuckets[i])}},
                     cumulative);
        }
        w.sample("outbox_handler_duration_seconds_bucket", {{"handler", handler}, {"le", "+Inf"}}, histogram.count);
        w.sample("outbox_handler_duration_seconds_sum", {{"handler", handler}}, number(histogram.sum));
        w.sample("outbox_handler_duration_seconds_count", {{"handler", handler}}, histogram.count);
    }

}

/// This host's single-valued gauges and counters.
void write_host_counters(Writer& w, const Metrics& metrics) {
    w.family("outbox_handler_abandoned_threads", "gauge",
             "Handler threads abandoned past their deadline plus outbox.abandon_grace that have not returned.");
    w.sample("outbox_handler_abandoned_threads", {}, static_cast<std::uint64_t>(std::max(0, metrics.abandoned_threads())));
    w.family("outbox_leases_lost_total", "counter", "Leases this host found taken over while its handlers ran.");
    w.sample("outbox_leases_lost_total", {}, metrics.leases_lost());
    w.family("outbox_outcomes_refused_total", "counter",
             "Attempt outcomes the database refused on their own; their events run again after lease expiry.");
    w.sample("outbox_outcomes_refused_total", {}, metrics.outcomes_refused());
    w.family("outbox_plugin_load_failures_total", "counter", "Plugin files this host refused to load.");
    w.sample("outbox_plugin_load_failures_total", {}, metrics.plugin_load_failures());
    w.family("outbox_events_rescued_total", "counter", "Expired leases this host's rescuer recovered.");
    w.sample("outbox_events_rescued_total", {}, metrics.events_rescued());
    w.family("outbox_admin_connections_refused_total", "counter",
             "Admin connections refused at once because every connection cap and probe place was taken.");
    w.sample("outbox_admin_connections_refused_total", {}, metrics.admin_connections_refused());
    w.family("outbox_events_claimed_total", "counter", "Events this host claimed.");
    w.sample("outbox_events_claimed_total", {}, metrics.events_claimed());
    w.family("outbox_telemetry_spans_exported_total", "counter",
             "Spans the OTLP endpoint accepted (telemetry.otlp_endpoint).");
    w.sample("outbox_telemetry_spans_exported_total", {}, metrics.telemetry_spans_exported());
    w.family("outbox_telemetry_spans_dropped_total", "counter",
             "Spans dropped: the export queue was full, or the OTLP endpoint did not take their batch.");
    w.sample("outbox_telemetry_spans_dropped_total", {}, metrics.telemetry_spans_dropped());
}

}  // namespace

std::string render_prometheus(const Metrics& metrics, const std::optional<DbGauges>& gauges, const HostInfo& host) {
    Writer w;
    w.family("outbox_host_info", "gauge", "This outboxd host: its host_id (lease_owner) and version.");
    w.sample("outbox_host_info", {{"host_id", host.host_id}, {"version", host.version}}, "1");

    w.family("outbox_database_up", "gauge", "1 when this scrape's database query succeeded (the DB gauges below are present).");
    w.sample("outbox_database_up", {}, gauges ? "1" : "0");
    if (gauges) write_database_gauges(w, *gauges);
    write_outcomes_and_calls(w, metrics);
    write_host_counters(w, metrics);
    return w.take();
}

}  // namespace outbox::metrics
