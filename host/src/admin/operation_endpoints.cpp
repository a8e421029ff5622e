// Operator jobs: POST /api/v1/admin/operations (a dry run's count and sample, or a job that
// re-drives, discards or cancels every event of the caller's company a filter matches),
// GET /api/v1/admin/operations (the newest jobs), GET /api/v1/admin/operations/{id} (its progress) and POST .../{id}/cancel, for ADMIN.
// The jobs are operations:: (operation_job.hpp), shared with `outboxd operations`.
#include <algorithm>
#include <set>

#include <pqxx/pqxx>

#include "admin/body_fields.hpp"
#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "core/parse_number.hpp"
#include "log/log.hpp"
#include "operations/operation_job.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

constexpr const char* kShape =
    R"(the body must be a JSON object {"action": "redrive"|"discard"|"cancel"|"replay", "filter": {"event_type", )"
    R"("last_error_code", "no_error_code", "status", "occurred_after", "occurred_before", "aggregate_key", "handler"}, )"
    R"("handler": "<the handler to run again, for replay>", "reason": "...", "dry_run": true|false})";


// Reads the body's "filter" into `f`; false when it was refused (the answer is in `res`).
bool read_filter(const json& filter, operations::OperationFilter& f, HttpResponse& res) {
    static const std::set<std::string> known{"event_type",      "last_error_code", "no_error_code", "status",
                                             "occurred_after",  "occurred_before", "aggregate_key", "handler"};
    for (const auto& [key, value] : filter.items()) {
        if (!known.contains(key)) {
            send_error(res, 400, "INVALID_FILTER",
                       "unknown filter field; allowed: event_type, last_error_code, no_error_code, status, "
                       "occurred_after, occurred_before, aggregate_key, handler");
            return false;
        }
    }
    if (!read_error_code_filter(filter, f.last_error_code, f.no_error_code, res)) return false;
    if (!optional_string(filter, "event_type", f.event_type) || !optional_string(filter, "status", f.status) || !optional_string(filter, "occurred_after", f.occurred_after) ||
        !optional_string(filter, "occurred_before", f.occurred_before) ||
        !optional_string(filter, "aggregate_key", f.aggregate_key) || !optional_string(filter, "handler", f.handler)) {
        send_error(res, 400, "INVALID_FILTER", "every filter field but no_error_code is a string");
        return false;
    }
    return true;
}

// The request of POST /api/v1/admin/operations; nullopt when refused (answered in `res`).
std::optional<operations::OperationRequest> read_request(const Principal& principal, const HttpRequest& req,
                                                         HttpResponse& res) {
    operations::OperationRequest request;
    request.idempotency_key = req.header("Idempotency-Key").value_or("");
    request.actor = principal.subject;
    request.company_id = principal.company_id;
    request.channel = "api";
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) {
        send_error(res, 400, "MALFORMED_JSON", "the request body is not valid JSON");
        return std::nullopt;
    }
    if (!body.is_object()) {
        send_error(res, 400, "INVALID_BODY", kShape);
        return std::nullopt;
    }
    for (const auto& [key, value] : body.items()) {
        if (key != "action" && key != "filter" && key != "handler" && key != "reason" && key != "dry_run") {
            send_error(res, 400, "INVALID_BODY", kShape);
            return std::nullopt;
        }
    }
    const auto action = body.find("action");
    const auto filter = body.find("filter");
    const auto dry_run = body.find("dry_run");
    if (action == body.end() || !action->is_string() || (dry_run != body.end() && !dry_run->is_boolean()) ||
        !optional_string(body, "handler", request.handler)) {
        send_error(res, 400, "INVALID_BODY", kShape);
        return std::nullopt;
    }
    request.action = action->get<std::string>();
    request.dry_run = dry_run != body.end() && dry_run->get<bool>();
    if (filter == body.end() || !filter->is_object()) {
        send_error(res, 400, "INVALID_FILTER", kShape);
        return std::nullopt;
    }
    if (!read_filter(*filter, request.filter, res)) return std::nullopt;
    auto reason = read_reason(body, res);
    if (!reason) return std::nullopt;
    request.reason = std::move(*reason);
    return request;
}

void send_not_found(HttpResponse& res) {
    send_error(res, 404, "OPERATION_NOT_FOUND", "no such operation for this company");
}

void start(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "start operations")) return;
    const auto request = read_request(*principal, req, res);
    if (!request) return;
    operations::OperationStartResult result;
    if (!context.with_database(*principal, res,
                               [&](pqxx::connection& conn) { result = operations::start_operation(conn, *request); })) {
        return;
    }
    if (const auto* rejected = std::get_if<operations::RetryRejected>(&result)) {
        send_error(res, rejected->kind == operations::RetryRejected::Kind::BadRequest ? 400 : 422, rejected->code,
                   rejected->message);
    } else if (const auto* preview = std::get_if<operations::OperationPreview>(&result)) {
        res.status = 200;
        res.body = json{{"count", preview->count}, {"sample_event_ids", preview->sample_event_ids}}.dump();
    } else {
        const auto& started = std::get<operations::OperationStarted>(result);
        if (started.replayed) {
            res.set_header("Idempotent-Replayed", "true");
        } else {
            log::info("operator job " + started.operation_id + " started: " + request->action);
        }
        res.status = 202;
        res.body = json{{"operation_id", started.operation_id}}.dump();
    }
}

void list(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "read operations")) return;
    for (const auto& [name, value] : req.query) {
        if (name != "state" && name != "limit") {
            return send_error(res, 400, "INVALID_QUERY", "unknown query parameter; allowed: state, limit");
        }
    }
    const auto state = req.query_param("state");
    if (state && std::find(operations::kOperationStates.begin(), operations::kOperationStates.end(), *state) ==
                     operations::kOperationStates.end()) {
        return send_error(res, 400, "INVALID_STATE", "state must be running, done, cancelled or failed");
    }
    int limit = 20;
    if (const auto text = req.query_param("limit")) {
        const auto parsed = core::parse_number<int>(*text);
        if (!parsed || *parsed < 1 || *parsed > operations::kMaxOperationList) {
            return send_error(res, 400, "INVALID_LIMIT",
                              "limit must be a whole number from 1 to " + std::to_string(operations::kMaxOperationList));
        }
        limit = *parsed;
    }
    std::vector<operations::OperationStatus> jobs;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            jobs = operations::list_operations(conn, principal->company_id, state, limit);
        })) {
        return;
    }
    json answer = json::array();
    for (const auto& job : jobs) answer.push_back(operations::to_json(job));
    res.status = 200;
    res.body = json{{"operations", std::move(answer)}}.dump();
}

void show(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "read operations")) return;
    if (!normalize_uuid(id)) return send_not_found(res);
    std::optional<operations::OperationStatus> status;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            status = operations::read_operation(conn, id, principal->company_id);
        })) {
        return;
    }
    if (!status) return send_not_found(res);
    res.status = 200;
    res.body = operations::to_json(*status).dump();
}

void cancel(AdminContext& context, const HttpRequest& req, HttpResponse& res, std::string id) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "cancel operations")) return;
    if (auto rejected = operations::validate_idempotency_key(req.header("Idempotency-Key").value_or(""))) {
        return send_error(res, 400, rejected->code, rejected->message);
    }
    if (!normalize_uuid(id)) return send_not_found(res);
    std::optional<operations::OperationCancelled> cancelled;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            cancelled = operations::cancel_operation(conn, id, principal->company_id, principal->subject, "api");
        })) {
        return;
    }
    if (!cancelled) return send_not_found(res);
    if (cancelled->changed) log::info("operator job " + id + " cancelled");
    // Cancelling a job that is over already changes nothing and says how it ended.
    res.status = 200;
    res.body = operations::to_json(cancelled->status).dump();
}

}  // namespace

void add_operation_endpoints(Router& router, AdminContext& context) {
    router.add("POST", "/api/v1/admin/operations",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { start(context, req, res); });
    router.add("GET", "/api/v1/admin/operations",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { list(context, req, res); });
    router.add("GET", "/api/v1/admin/operations/{id}",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   show(context, req, res, params.at(0));
               });
    router.add("POST", "/api/v1/admin/operations/{id}/cancel",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   cancel(context, req, res, params.at(0));
               });
}

}  // namespace outbox::admin
