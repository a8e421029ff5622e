// GET /api/v1/admin/outbox-events/{id}/history: which handlers consumed an event and the
// operators' actions on it (re-drives, one by one or in bulk, and discards), and
// GET .../{id}/attempts: every handler call of its attempts (outbox_attempt), for ADMIN, HR
// and VIEWER of the event's company. Another company's event answers like a missing one.
#include <optional>
#include <string>

#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "operations/attempt_history.hpp"
#include "operations/event_history.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

void history(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "outbox events")) return;
    if (!normalize_event_id(res, id)) return;
    const auto local = context.handlers();
    std::optional<json> answer;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            answer = operations::read_event_history(conn, *local, id, principal->company_id);
        })) {
        return;
    }
    if (!answer) return send_not_accessible(res);
    res.body = answer->dump();
}

void attempts(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_reader(*principal, res, "outbox events")) return;
    if (!normalize_event_id(res, id)) return;
    std::optional<json> answer;
    // A company's view: "host" is null, as lease_owner is absent (host names are the platform's).
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            answer = operations::read_attempts(conn, id, principal->company_id, false);
        })) {
        return;
    }
    if (!answer) return send_not_accessible(res);
    res.body = answer->dump();
}

}  // namespace

void add_history_endpoints(Router& router, AdminContext& context) {
    router.add("GET", "/api/v1/admin/outbox-events/{id}/history",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   history(context, req, res, params.at(0));
               });
    router.add("GET", "/api/v1/admin/outbox-events/{id}/attempts",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   attempts(context, req, res, params.at(0));
               });
}

}  // namespace outbox::admin
