#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "admin/http_message.hpp"
#include "db/db_error.hpp"

namespace outbox::admin {

/// The text of a JSON answer. Invalid UTF-8 (a header or database value that is not text)
/// becomes U+FFFD instead of throwing out of the endpoint.
std::string json_body(const nlohmann::json& answer);

/// Every 4xx/5xx answer: {"error": {"code", "message", ...extra}}.
void send_error(HttpResponse& res, int status, const std::string& code, const std::string& message,
                const nlohmann::json& extra = nlohmann::json::object());

/// The JSON answer for a refusal made before any endpoint ran (by the transport or the
/// router), e.g. 400 BAD_REQUEST, 413 PAYLOAD_TOO_LARGE, 414 URI_TOO_LONG.
HttpResponse transport_error(int status, std::size_t max_body_bytes = 0);

/// Maps a failed database call to 503 (unreachable, in doubt, busy, timeout) or 500, and
/// logs it (without caller-supplied text).
void send_db_failure(HttpResponse& res, const db::DbFailure& failure);

}  // namespace outbox::admin
