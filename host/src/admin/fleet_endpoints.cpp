// GET /api/v1/admin/fleet: the hosts sharing this database, their handlers and the handlers
// paused fleet-wide. Host names, pids and plugin file names are the platform's: only
// admin.platform_roles may read them.
#include <optional>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "fleet/fleet_registry.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::admin {
namespace {

void fleet_view(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !context.auth().require_platform_role(*principal, res)) return;
    std::optional<fleet::FleetView> view;
    std::vector<routing::PausedHandler> paused;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            view = fleet::read_fleet(conn);
            paused = routing::read_paused_handlers(conn);
        })) {
        return;
    }
    nlohmann::json answer = fleet::to_json(*view);
    // Handlers paused fleet-wide (outbox_handler_pause): no host claims their event types.
    answer["paused"] = nlohmann::json::array();
    for (const auto& p : paused) {
        nlohmann::json item{{"handler", p.handler}, {"paused_by", p.paused_by}, {"paused_at", p.paused_at},
                            {"circuit_open", p.circuit_open()}};
        if (p.circuit_open() && !p.next_probe_at.empty()) item["next_probe_at"] = p.next_probe_at;
        answer["paused"].push_back(std::move(item));
    }
    res.body = answer.dump();
}

}  // namespace

void add_fleet_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/fleet",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { fleet_view(context, req, res); });
}

}  // namespace outbox::admin
