#include "admin/error_mapping.hpp"

#include "log/log.hpp"

namespace outbox::admin {

using nlohmann::json;

std::string json_body(const json& answer) {
    return answer.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_error(HttpResponse& res, int status, const std::string& code, const std::string& message,
                const json& extra) {
    json error{{"code", code}, {"message", message}};
    for (const auto& [key, value] : extra.items()) error[key] = value;
    res.status = status;
    res.content_type = "application/json";
    res.body = json_body(json{{"error", std::move(error)}});
}

HttpResponse transport_error(int status, std::size_t max_body_bytes) {
    HttpResponse res;
    switch (status) {
        case 400: send_error(res, 400, "BAD_REQUEST", "the request is malformed"); break;
        case 404: send_error(res, 404, "NOT_FOUND", "no such endpoint"); break;
        case 408: send_error(res, 408, "REQUEST_TIMEOUT", "the request was not received in time"); break;
        case 411: send_error(res, 411, "LENGTH_REQUIRED", "a request body needs a Content-Length header"); break;
        case 413:
            send_error(res, 413, "PAYLOAD_TOO_LARGE",
                       "the request body is larger than " + std::to_string(max_body_bytes) + " bytes");
            break;
        case 414: send_error(res, 414, "URI_TOO_LONG", "the request URI is too long"); break;
        case 415: send_error(res, 415, "UNSUPPORTED_MEDIA_TYPE", "a Content-Encoding on requests is not accepted"); break;
        case 431:
            send_error(res, 431, "HEADERS_TOO_LARGE", "the request has too many header fields or too many header bytes");
            break;
        case 503: send_error(res, 503, "BUSY", "the server is busy; try again"); break;
        default:
            send_error(res, status, status >= 500 ? "INTERNAL" : "BAD_REQUEST",
                       status >= 500 ? "internal error" : "the request was refused");
    }
    return res;
}

void send_db_failure(HttpResponse& res, const db::DbFailure& failure) {
    log::warn("admin API: database request failed: " + failure.describe());
    switch (failure.kind) {
        case db::DbFailureKind::ConnectionBroken:
            send_error(res, 503, "DATABASE_UNAVAILABLE", "the database is unreachable; try again later");
            break;
        case db::DbFailureKind::InDoubt:
            send_error(res, 503, "OUTCOME_UNKNOWN",
                       "the database connection was lost while committing; repeat a retry with the same "
                       "Idempotency-Key to learn its outcome");
            break;
        case db::DbFailureKind::Conflict: send_error(res, 503, "BUSY", "the database is busy; try again"); break;
        case db::DbFailureKind::Timeout:
            if (failure.sqlstate.empty()) {
                send_error(res, 503, "BUSY", "every admin database connection is in use; try again");
            } else {
                send_error(res, 503, "TIMEOUT", "the database did not answer in time; try again");
            }
            break;
        case db::DbFailureKind::Sql:
            if (failure.sqlstate == "55P03") {
                send_error(res, 503, "BUSY", "the event is locked by another operation; try again");
            } else {
                send_error(res, 500, "INTERNAL", "internal error");
            }
            break;
        case db::DbFailureKind::Other: send_error(res, 500, "INTERNAL", "internal error"); break;
    }
}

}  // namespace outbox::admin
