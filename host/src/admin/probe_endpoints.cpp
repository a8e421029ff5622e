// GET /healthz, /readyz and /metrics: unauthenticated, answered for load balancers,
// orchestrators and Prometheus.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "admin/shared_result.hpp"
#include "fleet/fleet_registry.hpp"
#include "log/log.hpp"
#include "metrics/prometheus.hpp"
#include "operations/backlog_query.hpp"

namespace outbox::admin {
namespace {

// Probes bound their call a little beyond the statement timeout, so a silent server makes
// them fail fast instead of hanging.
std::chrono::milliseconds probe_bound(const AdminContext& context) {
    return context.options().probe_timeout + std::chrono::seconds{1};
}

void healthz(HttpResponse& res) { res.body = R"({"status":"ok"})"; }

void readyz(AdminContext& context, HttpResponse& res) {
    const auto timeout = context.options().probe_timeout;
    const auto failure =
        context.try_probe_database([&](pqxx::connection& conn) { operations::ping_database(conn, timeout); }, probe_bound(context));
    if (failure) {
        send_error(res, 503, "DATABASE_UNAVAILABLE", "the database does not answer (" + failure->describe() + ")");
        return;
    }
    if (context.options().processing_enabled && context.handlers()->entries().empty()) {
        send_error(res, 503, "NO_HANDLERS",
                   "no handler plugin is loaded while processing is enabled; check plugins.dir and the start-up log");
        return;
    }
    res.body = R"({"status":"ready"})";
}

/// The database part of /metrics, computed at most once per admin.metrics_cache for a
/// handler set, with one computation in flight: scrapers cannot multiply the queries.
std::optional<metrics::DbGauges> compute_gauges(AdminContext& context, const routing::HandlerSet& handlers) {
    std::optional<metrics::DbGauges> gauges;
    const auto failure = context.try_probe_database(
        [&](pqxx::connection& conn) {
            gauges = operations::read_db_gauges(conn, handlers, context.options().probe_timeout);
            const fleet::FleetView view = fleet::read_fleet(conn);
            for (const auto& host : view.hosts) {
                ++gauges->fleet_hosts[host.live ? "live" : host.stopped ? "stopped" : "gone"];
            }
            gauges->fleet_handler_mismatches = static_cast<long long>(view.mismatches.size());
        },
        probe_bound(context));
    if (failure) {
        log::debug("metrics: database gauges unavailable: " + failure->describe());
        return std::nullopt;
    }
    return gauges;
}

using GaugeCache = SharedResult<metrics::DbGauges>;

void metrics_page(AdminContext& context, GaugeCache& cache, HttpResponse& res) {
    const auto handlers = context.handlers();
    // Keyed by the handler set: a reloaded set is not shown the previous set's gauges.
    const std::optional<metrics::DbGauges> gauges =
        cache.get(std::to_string(reinterpret_cast<std::uintptr_t>(handlers.get())), context.options().metrics_cache,
                  probe_bound(context), [&] { return compute_gauges(context, *handlers); });
    res.content_type = metrics::kPrometheusContentType;
    res.body = metrics::render_prometheus(context.metrics(), gauges, {context.options().host_id, OUTBOXD_VERSION});
}

}  // namespace

void add_probe_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/healthz", [](const HttpRequest&, HttpResponse& res, const PathParams&) { healthz(res); },
               Lane::Inline);
    router.add("GET", "/readyz",
               [&context](const HttpRequest&, HttpResponse& res, const PathParams&) { readyz(context, res); },
               Lane::Probe);
    auto cache = std::make_shared<GaugeCache>(1);
    router.add(
        "GET", "/metrics",
        [&context, cache](const HttpRequest&, HttpResponse& res, const PathParams&) { metrics_page(context, *cache, res); },
        Lane::Probe);
}

}  // namespace outbox::admin
