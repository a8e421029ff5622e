// GET /healthz, /readyz and /metrics: unauthenticated, answered for load balancers,
// orchestrators and Prometheus.
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include <pqxx/pqxx>

#include "admin/db_probe.hpp"
#include "admin/endpoints.hpp"
#include "fleet/fleet_registry.hpp"
#include "log/log.hpp"
#include "metrics/prometheus.hpp"

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
        context.try_probe_database([&](pqxx::connection& conn) { ping_database(conn, timeout); }, probe_bound(context));
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

/// The database part of /metrics, computed at most once per admin.metrics_cache with one
/// computation in flight: a scrape during it gets the previous value (or, before the first
/// one finished, waits for it), so scrapers cannot multiply the queries.
class GaugeCache {
public:
    std::optional<metrics::DbGauges> get(AdminContext& context) {
        const auto handlers = context.handlers();
        std::unique_lock lock(mutex_);
        const auto now = std::chrono::steady_clock::now();
        const bool fresh = computed_ && handlers.get() == handlers_for_ &&
                           now - computed_at_ < context.options().metrics_cache;
        if (fresh) return value_;
        if (computing_) {
            if (computed_) return value_;
            done_.wait_for(lock, probe_bound(context), [&] { return !computing_; });
            return value_;
        }
        computing_ = true;
        lock.unlock();
        std::optional<metrics::DbGauges> gauges = compute(context, *handlers);
        lock.lock();
        value_ = std::move(gauges);
        computed_ = true;
        computed_at_ = std::chrono::steady_clock::now();
        handlers_for_ = handlers.get();
        computing_ = false;
        done_.notify_all();
        return value_;
    }

private:
    static std::optional<metrics::DbGauges> compute(AdminContext& context, const dispatch::HandlerSet& handlers) {
        std::optional<metrics::DbGauges> gauges;
        const auto failure = context.try_probe_database(
            [&](pqxx::connection& conn) {
                gauges = read_db_gauges(conn, handlers, context.options().probe_timeout);
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

    std::mutex mutex_;
    std::condition_variable done_;
    bool computing_ = false;
    bool computed_ = false;
    std::chrono::steady_clock::time_point computed_at_{};
    const dispatch::HandlerSet* handlers_for_ = nullptr;  // the handler set the value was computed for
    std::optional<metrics::DbGauges> value_;
};

void metrics_page(AdminContext& context, GaugeCache& cache, HttpResponse& res) {
    const std::optional<metrics::DbGauges> gauges = cache.get(context);
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
    auto cache = std::make_shared<GaugeCache>();
    router.add(
        "GET", "/metrics",
        [&context, cache](const HttpRequest&, HttpResponse& res, const PathParams&) { metrics_page(context, *cache, res); },
        Lane::Probe);
}

}  // namespace outbox::admin
