// POST /api/v1/admin/outbox-events/{id}/retry, .../{id}/discard and .../{id}/cancel: an ADMIN
// re-drives a REVIEW_REQUIRED event of its company, gives up on a REVIEW_REQUIRED, PENDING or
// RETRY_WAIT one, or cancels a PENDING or RETRY_WAIT one. All take the same request and give
// the same answers (RetryService and DiscardService do the work, shared with the CLI).
#include <functional>

#include <pqxx/pqxx>

#include "admin/body_fields.hpp"
#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "log/log.hpp"
#include "metrics/metrics.hpp"
#include "operations/discard_service.hpp"
#include "operations/retry_service.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

struct EventAction {
    const char* what;          // "retry events", in the 403 answer
    const char* new_status;    // the status a 202 reports
    const char* accepted_log;  // "manual retry accepted: event is PENDING"
    std::function<operations::RetryResult(pqxx::connection&, const operations::RetryRequest&)> perform;
    std::function<void(AdminContext&)> on_accepted;  // counted once, never for a replay
};

// The request both actions take: {"expected_version": N, "reason": "..."} with an
// Idempotency-Key header. Answers the error itself and returns nullopt when it is malformed.
std::optional<operations::RetryRequest> read_action_request(const Principal& principal, const HttpRequest& req, HttpResponse& res,
                                                std::string id) {
    operations::RetryRequest request;
    request.event_id = std::move(id);
    request.idempotency_key = req.header("Idempotency-Key").value_or("");
    request.actor = principal.subject;
    request.company_id = principal.company_id;
    request.channel = "api";
    if (request.idempotency_key.empty()) {
        send_error(res, 400, "MISSING_IDEMPOTENCY_KEY", "the Idempotency-Key header is required");
        return std::nullopt;
    }
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
        send_error(res, 400, "MALFORMED_JSON", "the request body is not valid JSON");
        return std::nullopt;
    }
    if (!body.is_object()) {
        send_error(res, 400, "INVALID_BODY", R"(the body must be a JSON object {"expected_version": N, "reason": "..."})");
        return std::nullopt;
    }
    const auto version = body.find("expected_version");
    if (version == body.end() || !version->is_number_integer()) {
        send_error(res, 400, "INVALID_EXPECTED_VERSION",
                   "expected_version must be the event's current version, a positive integer");
        return std::nullopt;
    }
    request.expected_version = version->get<long long>();
    auto reason = read_reason(body, res);
    if (!reason) return std::nullopt;
    request.reason = std::move(*reason);
    return request;
}

void act_on_event(AdminContext& context, const EventAction& action, const HttpRequest& req, HttpResponse& res,
                  std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, action.what)) return;
    const auto request = read_action_request(*principal, req, res, std::move(id));
    if (!request) return;

    operations::RetryResult result;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) { result = action.perform(conn, *request); })) {
        return;
    }
    if (const auto* accepted = std::get_if<operations::RetryAccepted>(&result)) {
        if (accepted->replayed) {
            res.set_header("Idempotent-Replayed", "true");
        } else {
            if (action.on_accepted) action.on_accepted(context);
            log::info(std::string(action.accepted_log) + " at version " + std::to_string(accepted->version),
                      {.event_id = accepted->event_id});
        }
        res.status = 202;
        res.body =
            json{{"event_id", accepted->event_id}, {"status", action.new_status}, {"version", accepted->version}}.dump();
    } else if (const auto* conflict = std::get_if<operations::RetryConflict>(&result)) {
        send_error(res, 409, conflict->code, conflict->message,
                   {{"current_version", conflict->current_version}, {"current_status", conflict->current_status}});
    } else {
        const auto& rejected = std::get<operations::RetryRejected>(result);
        switch (rejected.kind) {
            case operations::RetryRejected::Kind::BadRequest: send_error(res, 400, rejected.code, rejected.message); break;
            case operations::RetryRejected::Kind::Unprocessable: send_error(res, 422, rejected.code, rejected.message); break;
            case operations::RetryRejected::Kind::NotVisible: send_not_accessible(res); break;
        }
    }
}

void add_event_action(Router& router, AdminContext& context, const char* path, EventAction action) {
    router.add("POST", path,
               [&context, action = std::move(action)](const HttpRequest& req, HttpResponse& res,
                                                      const PathParams& params) {
                   act_on_event(context, action, req, res, params.at(0));
               });
}

}  // namespace

void add_retry_endpoints(Router& router, AdminContext& context) {
    add_event_action(router, context, "/api/v1/admin/outbox-events/{id}/retry",
                     EventAction{"retry events", "PENDING", "manual retry accepted: event is PENDING",
                                 [](pqxx::connection& conn, const operations::RetryRequest& request) {
                                     return operations::RetryService(conn).retry(request);
                                 },
                                 nullptr});
}

void add_discard_endpoints(Router& router, AdminContext& context) {
    add_event_action(router, context, "/api/v1/admin/outbox-events/{id}/discard",
                     EventAction{"discard events", "DISCARDED", "discard accepted: event is DISCARDED",
                                 [](pqxx::connection& conn, const operations::RetryRequest& request) {
                                     return operations::DiscardService(conn).discard(request);
                                 },
                                 [](AdminContext& ctx) {
                                     ctx.metrics().event_outcome(metrics::Metrics::Outcome::Discarded);
                                 }});
    add_event_action(router, context, "/api/v1/admin/outbox-events/{id}/cancel",
                     EventAction{"cancel events", "DISCARDED", "cancel accepted: event is DISCARDED",
                                 [](pqxx::connection& conn, const operations::RetryRequest& request) {
                                     return operations::DiscardService(conn).cancel(request);
                                 },
                                 [](AdminContext& ctx) {
                                     ctx.metrics().event_outcome(metrics::Metrics::Outcome::Discarded);
                                 }});
}

}  // namespace outbox::admin
