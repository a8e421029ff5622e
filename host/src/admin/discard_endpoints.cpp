// POST /api/v1/admin/outbox-events/{id}/discard: an ADMIN gives up on a REVIEW_REQUIRED
// event of its company (DiscardService does the work). The request and its answers are
// those of the retry endpoint.
#include <pqxx/pqxx>

#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "metrics/metrics.hpp"
#include "admin/discard_service.hpp"
#include "log/log.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

void discard_event(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "discard events")) return;
    DiscardRequest request;
    request.event_id = std::move(id);
    request.idempotency_key = req.header("Idempotency-Key").value_or("");
    request.actor = principal->subject;
    request.company_id = principal->company_id;
    request.channel = "api";
    if (request.idempotency_key.empty()) {
        send_error(res, 400, "MISSING_IDEMPOTENCY_KEY", "the Idempotency-Key header is required");
        return;
    }
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
        send_error(res, 400, "MALFORMED_JSON", "the request body is not valid JSON");
        return;
    }
    if (!body.is_object()) {
        send_error(res, 400, "INVALID_BODY", R"(the body must be a JSON object {"expected_version": N, "reason": "..."})");
        return;
    }
    const auto version = body.find("expected_version");
    if (version == body.end() || !version->is_number_integer()) {
        send_error(res, 400, "INVALID_EXPECTED_VERSION",
                   "expected_version must be the event's current version, a positive integer");
        return;
    }
    request.expected_version = version->get<long long>();
    const auto reason = body.find("reason");
    if (reason == body.end() || !reason->is_string()) {
        send_error(res, 422, "INVALID_REASON", "reason must be a string of 10 to 300 characters");
        return;
    }
    request.reason = reason->get<std::string>();

    DiscardResult result;
    if (!context.with_database(res, [&](pqxx::connection& conn) { result = DiscardService(conn).discard(request); })) {
        return;
    }
    if (const auto* accepted = std::get_if<RetryAccepted>(&result)) {
        if (accepted->replayed) {
            res.set_header("Idempotent-Replayed", "true");
        } else {
            context.metrics().event_outcome(metrics::Metrics::Outcome::Discarded);
            log::info("discard accepted: event is DISCARDED at version " + std::to_string(accepted->version),
                      {.event_id = accepted->event_id});
        }
        res.status = 202;
        res.body = json{{"event_id", accepted->event_id}, {"status", "DISCARDED"}, {"version", accepted->version}}.dump();
    } else if (const auto* conflict = std::get_if<RetryConflict>(&result)) {
        send_error(res, 409, conflict->code, conflict->message,
                   {{"current_version", conflict->current_version}, {"current_status", conflict->current_status}});
    } else {
        const auto& rejected = std::get<RetryRejected>(result);
        switch (rejected.kind) {
            case RetryRejected::Kind::BadRequest: send_error(res, 400, rejected.code, rejected.message); break;
            case RetryRejected::Kind::Unprocessable: send_error(res, 422, rejected.code, rejected.message); break;
            case RetryRejected::Kind::NotVisible: send_not_accessible(res); break;
        }
    }
}

}  // namespace

void add_discard_endpoints(Router& router, AdminContext& context) {
    router.add("POST", "/api/v1/admin/outbox-events/{id}/discard",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   discard_event(context, req, res, params.at(0));
               });
}

}  // namespace outbox::admin
