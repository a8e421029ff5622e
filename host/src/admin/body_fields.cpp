#include "admin/body_fields.hpp"

#include "admin/error_mapping.hpp"

namespace outbox::admin {

using nlohmann::json;

bool optional_string(const json& object, const char* name, std::optional<std::string>& out) {
    const auto it = object.find(name);
    if (it == object.end() || it->is_null()) return true;
    if (!it->is_string()) return false;
    out = it->get<std::string>();
    return true;
}

std::optional<std::string> read_reason(const json& body, HttpResponse& res) {
    const auto reason = body.find("reason");
    if (reason == body.end() || !reason->is_string()) {
        send_error(res, 422, "INVALID_REASON", "reason must be a string of 10 to 300 characters");
        return std::nullopt;
    }
    return reason->get<std::string>();
}

bool read_error_code_filter(const json& filter, std::optional<std::string>& last_error_code, bool& no_error_code,
                            HttpResponse& res) {
    if (const auto code = filter.find("last_error_code"); code != filter.end() && code->is_null()) {
        send_error(res, 422, "INVALID_FILTER",
                   "last_error_code cannot be null: omit it for any code, or send \"no_error_code\": true for events "
                   "without one");
        return false;
    }
    if (const auto none = filter.find("no_error_code"); none != filter.end() && !none->is_null()) {
        if (!none->is_boolean()) {
            send_error(res, 400, "INVALID_FILTER", "no_error_code is true or false");
            return false;
        }
        no_error_code = none->get<bool>();
    }
    if (!optional_string(filter, "last_error_code", last_error_code)) {
        send_error(res, 400, "INVALID_FILTER", "last_error_code is a string");
        return false;
    }
    return true;
}

}  // namespace outbox::admin
