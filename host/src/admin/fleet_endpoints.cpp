// GET /api/v1/admin/fleet: the hosts sharing this database and their handlers. Host names,
// pids and plugin file names are the platform's: only admin.platform_roles may read them.
#include <optional>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "fleet/fleet_registry.hpp"

namespace outbox::admin {
namespace {

void fleet_view(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !context.auth().require_platform_role(*principal, res)) return;
    std::optional<fleet::FleetView> view;
    if (!context.with_database(res, [&](pqxx::connection& conn) { view = fleet::read_fleet(conn); })) return;
    res.body = fleet::to_json(*view).dump();
}

}  // namespace

void add_fleet_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/fleet",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { fleet_view(context, req, res); });
}

}  // namespace outbox::admin
