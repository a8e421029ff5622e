#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace outbox::sdk {

/// One event as a handler sees it. Plain data: the host fills it in, the handler reads it.
/// The payload is passed as JSON text (never as a JSON object type) so that nothing but
/// standard-library types crosses the plugin boundary.
struct Event {
    std::string id;             ///< event_id (UUID text); use it as the idempotency key of remote calls
    std::string type;           ///< event_type, e.g. "WebsiteRegistered"
    std::string company_id;     ///< tenant
    std::string aggregate_key;  ///< optional ordering key, empty when not set
    std::string payload_json;   ///< a flat JSON object of scalar fields
    int attempt = 0;            ///< 1 on the first delivery; counts attempts that crashed too
    std::chrono::system_clock::time_point occurred_at{};

    /// Parses payload_json on the plugin side. Throws nlohmann::json::parse_error only if
    /// the host handed over invalid JSON, which the schema prevents.
    [[nodiscard]] nlohmann::json payload() const { return nlohmann::json::parse(payload_json); }
};

}  // namespace outbox::sdk
