// Operator actions on groups: POST /api/v1/admin/outbox-events/retry (an ADMIN re-drives
// its company's REVIEW_REQUIRED events matching a filter; BulkRetryService, shared with
// `outboxd retry --event-type/--code`) and POST /api/v1/admin/handlers/{name}/pause|resume
// (a platform role pauses or resumes a handler on every host; shared with `outboxd handlers`).
#include <pqxx/pqxx>

#include "admin/body_fields.hpp"
#include "admin/endpoints.hpp"
#include "admin/event_id.hpp"
#include "core/identifiers.hpp"
#include "log/log.hpp"
#include "operations/bulk_retry_service.hpp"
#include "operations/handler_pause.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

constexpr const char* kBulkShape =
    R"(the body must be a JSON object {"filter": {"event_type": "...", "last_error_code": "...", "no_error_code": true, )"
    R"("event_ids": ["<uuid>", ...], "occurred_before": "<RFC 3339>", "limit": N}, "reason": "..."})";

// A string member of `object` when present (null counts as absent); false when it is there
// but not a string.

// `ids`: an array of 1 to kMaxBulkRetry UUIDs, stored lower-cased into `f.event_ids`.
bool read_event_ids(const json& ids, operations::BulkRetryFilter& f) {
    if (!ids.is_array() || ids.empty() || ids.size() > static_cast<std::size_t>(operations::kMaxBulkRetry)) return false;
    std::vector<std::string> out;
    for (const auto& item : ids) {
        if (!item.is_string()) return false;
        std::string id = item.get<std::string>();
        if (!normalize_uuid(id)) return false;
        out.push_back(std::move(id));
    }
    f.event_ids = std::move(out);
    return true;
}

// Reads the body's "filter" into `f`; false when it was refused (the answer is in `res`).
bool read_bulk_filter(const json& filter, operations::BulkRetryFilter& f, HttpResponse& res) {
    for (const auto& [key, value] : filter.items()) {
        if (key != "event_type" && key != "last_error_code" && key != "no_error_code" && key != "event_ids" &&
            key != "occurred_before" && key != "limit") {
            send_error(res, 400, "INVALID_FILTER",
                       "unknown filter field; allowed: event_type, last_error_code, no_error_code, event_ids, "
                       "occurred_before, limit");
            return false;
        }
    }
    if (!read_error_code_filter(filter, f.last_error_code, f.no_error_code, res)) return false;
    if (!optional_string(filter, "event_type", f.event_type) ||
        !optional_string(filter, "occurred_before", f.occurred_before)) {
        send_error(res, 400, "INVALID_FILTER", "event_type and occurred_before are strings");
        return false;
    }
    if (const auto ids = filter.find("event_ids"); ids != filter.end() && !ids->is_null()) {
        if (!read_event_ids(*ids, f)) {
            send_error(res, 400, "INVALID_FILTER",
                       "event_ids must be an array of 1 to " + std::to_string(operations::kMaxBulkRetry) + " event ids (UUIDs)");
            return false;
        }
        f.limit = static_cast<int>(f.event_ids->size());  // all of them unless a limit says otherwise
    }
    if (const auto limit = filter.find("limit"); limit != filter.end() && !limit->is_null()) {
        if (!limit->is_number_integer() || limit->get<long long>() < 1 || limit->get<long long>() > operations::kMaxBulkRetry) {
            send_error(res, 422, "INVALID_LIMIT", "limit must be 1 to " + std::to_string(operations::kMaxBulkRetry));
            return false;
        }
        f.limit = limit->get<int>();
    }
    return true;
}

void bulk_retry(AdminContext& context, const HttpRequest& req, HttpResponse& res) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !require_admin(*principal, res, "retry events")) return;
    operations::BulkRetryRequest request;
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
        send_error(res, 400, "INVALID_BODY", kBulkShape);
        return;
    }
    for (const auto& [key, value] : body.items()) {
        if (key != "filter" && key != "reason") {
            send_error(res, 400, "INVALID_BODY", kBulkShape);
            return;
        }
    }
    const auto filter = body.find("filter");
    if (filter == body.end() || !filter->is_object()) {
        send_error(res, 400, "INVALID_FILTER", kBulkShape);
        return;
    }
    if (!read_bulk_filter(*filter, request.filter, res)) return;
    auto reason = read_reason(body, res);
    if (!reason) return;
    request.reason = std::move(*reason);

    operations::BulkRetryResult result;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            result = operations::BulkRetryService(conn).retry(request);
        })) {
        return;
    }
    if (const auto* rejected = std::get_if<operations::RetryRejected>(&result)) {
        send_error(res, rejected->kind == operations::RetryRejected::Kind::BadRequest ? 400 : 422, rejected->code, rejected->message);
        return;
    }
    const auto& accepted = std::get<operations::BulkRetryAccepted>(result);
    if (accepted.replayed) {
        res.set_header("Idempotent-Replayed", "true");
    } else {
        log::info("bulk retry accepted: " + std::to_string(accepted.event_ids.size()) + " event(s) PENDING");
    }
    res.status = 202;
    res.body = json{{"count", accepted.event_ids.size()}, {"event_ids", accepted.event_ids}}.dump();
}

void set_paused(AdminContext& context, const HttpRequest& req, HttpResponse& res, const std::string& name, bool pause) {
    const auto principal = context.auth().authenticate(req, res);
    if (!principal || !context.auth().require_platform_role(*principal, res)) return;
    if (!core::is_handler_name(name)) {
        send_error(res, 400, "INVALID_HANDLER_NAME", "a handler name is 1 to 100 of a-z 0-9 . _ - starting with a letter or digit");
        return;
    }
    bool changed = false;
    if (!context.with_database(*principal, res, [&](pqxx::connection& conn) {
            changed = operations::set_handler_paused(conn, name, pause, principal->subject, "api");
        })) {
        return;
    }
    if (changed) log::info(std::string("handler ") + (pause ? "paused" : "resumed") + " fleet-wide: " + name);
    res.status = 200;
    res.body = json{{"handler", name}, {"paused", pause}, {"changed", changed}}.dump();
}

}  // namespace

void add_operator_endpoints(Router& router, AdminContext& context) {
    router.add("POST", "/api/v1/admin/outbox-events/retry",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams&) { bulk_retry(context, req, res); });
    router.add("POST", "/api/v1/admin/handlers/{name}/pause",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   set_paused(context, req, res, params.at(0), true);
               });
    router.add("POST", "/api/v1/admin/handlers/{name}/resume",
               [&context](const HttpRequest& req, HttpResponse& res, const PathParams& params) {
                   set_paused(context, req, res, params.at(0), false);
               });
}

}  // namespace outbox::admin
