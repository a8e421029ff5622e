// GET /api/v1/admin/outbox-events and GET /api/v1/admin/outbox-events/{id}: a company's
// events, read-only, for ADMIN, HR and VIEWER.
#include <algorithm>
#include <cctype>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "operations/event_query.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

void list_events(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "outbox events")) return;
    operations::EventFilter filter;
    if (const auto error = operations::parse_event_filter(req.query_param("status"), req.query_param("event_type"),
                                              req.query_param("last_error_code"),
                                              req.query_param("limit"), req.query_param("cursor"), filter)) {
        send_error(res, 400, error->code, error->message);
        return;
    }
    json page;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            page = operations::EventQuery(conn).list(principal->company_id, filter);
        })) {
        return;
    }
    res.body = page.dump();
}

void get_event(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "outbox events")) return;
    if (!normalize_event_id(res, id)) return;
    std::optional<json> event;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            event = operations::EventQuery(conn).get(principal->company_id, id);
        })) {
        return;
    }
    if (!event) return send_not_accessible(res);
    res.body = event->dump();
}

}  // namespace

void add_event_read_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/outbox-events",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { list_events(context, req, res); });
    router.add("GET", "/api/v1/admin/outbox-events/{id}",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   get_event(context, req, res, params.at(0));
               });
}

}  // namespace outbox::admin
