#pragma once

// Fields that several operator request bodies share, read one way everywhere.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "admin/http_message.hpp"

namespace outbox::admin {

/// `object[name]` into `out` when it is a string; absent or null leaves `out` as it is.
/// False when it is present and not a string (the caller answers).
bool optional_string(const nlohmann::json& object, const char* name, std::optional<std::string>& out);

/// The "reason" of an operator's action. Missing or not a string: answers 422 INVALID_REASON
/// and returns nothing (its length is the service's check).
std::optional<std::string> read_reason(const nlohmann::json& body, HttpResponse& res);

/// A filter's "last_error_code" (a string; null is refused with 422, since a null code once
/// meant "any code" and re-drove other groups' events) and "no_error_code" (true or false;
/// absent or null is false). False when refused (the answer is in `res`).
bool read_error_code_filter(const nlohmann::json& filter, std::optional<std::string>& last_error_code,
                            bool& no_error_code, HttpResponse& res);

}  // namespace outbox::admin
