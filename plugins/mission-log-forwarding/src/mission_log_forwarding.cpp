// mission-log-forwarding: forwards each completed mission to the stats admin server.
//
// Event MissionCompleted, payload {"completion_id", "user_id", "mission_id", "solar_term"}.
// POST <base_url>/api/stats/mission-log with those fields as JSON and
// Idempotency-Key: <event_id>. The admin server counts a key once, so a retry after a lost
// response (or after this host died mid-call) cannot count a mission twice.
#include <array>
#include <string>
#include <vector>

#include <outbox/sdk.hpp>
#include <outbox/sdk/http.hpp>

namespace mission_log_forwarding {
namespace {

using outbox::sdk::http::Endpoint;
using outbox::sdk::http::InvalidConfig;
using outbox::sdk::http::parse_duration;
using outbox::sdk::http::parse_endpoint;
using std::chrono::milliseconds;

constexpr milliseconds kDefaultTimeout{std::chrono::seconds{5}};
constexpr const char* kPath = "/api/stats/mission-log";
constexpr std::size_t kMaxFieldLength = 256;
// The ids the application may publish as JSON numbers (PeakTime's ids are Java Longs) or as
// strings; each is forwarded with the type it was published with.
constexpr std::array<const char*, 3> kIdFields{"completion_id", "user_id", "mission_id"};

struct Settings {
    Endpoint endpoint;  // base_url with kPath appended
    milliseconds timeout = kDefaultTimeout;
};

Settings parse_settings(const std::string& config_json) {
    const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
    if (!config.is_object()) throw InvalidConfig("config: expected an object");
    for (const auto& [key, value] : config.items()) {
        if (key != "base_url" && key != "timeout") {
            throw InvalidConfig("config." + key + ": unknown key (allowed: base_url, timeout)");
        }
    }
    if (!config.contains("base_url") || !config["base_url"].is_string()) {
        throw InvalidConfig("config.base_url: required, the admin server's base URL");
    }
    Settings settings;
    settings.endpoint = parse_endpoint(config["base_url"].get<std::string>(), "config.base_url");
    if (settings.endpoint.path.find('?') != std::string::npos) {
        throw InvalidConfig("config.base_url: a query string is not allowed");
    }
    // base_url may carry a path prefix (a gateway route); join it without doubling '/'.
    std::string& path = settings.endpoint.path;
    while (!path.empty() && path.back() == '/') path.pop_back();
    path += kPath;
    if (config.contains("timeout")) settings.timeout = parse_duration(config["timeout"], "config.timeout");
    return settings;
}

}  // namespace

class MissionLogForwarding final : public outbox::sdk::Handler {
public:
    /// Throws InvalidConfig for a missing or bad key; the host then refuses the plugin.
    explicit MissionLogForwarding(const std::string& config_json) : settings_(parse_settings(config_json)) {}

    [[nodiscard]] std::string handler_name() const override { return "mission-log-forwarding"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"MissionCompleted"}; }

    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        const nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
        // Only the declared fields travel: the admin server gets exactly its contract.
        nlohmann::json body = nlohmann::json::object();
        const auto usable_text = [](const nlohmann::json& value) {
            return value.is_string() && !value.get<std::string>().empty() &&
                   value.get<std::string>().size() <= kMaxFieldLength;
        };
        for (const char* field : kIdFields) {
            if (!payload.is_object() || !payload.contains(field) ||
                !(payload[field].is_number_integer() || usable_text(payload[field]))) {
                throw outbox::sdk::NonRetryableError("BAD_PAYLOAD",
                                                     std::string("payload field missing or not an integer or text: ") + field);
            }
            body[field] = payload[field];
        }
        if (!payload.contains("solar_term") || !usable_text(payload["solar_term"])) {
            throw outbox::sdk::NonRetryableError("BAD_PAYLOAD", "payload field missing or not text: solar_term");
        }
        body["solar_term"] = payload["solar_term"];

        outbox::sdk::http::post_json(ctx, settings_.endpoint,
                                     {{"Idempotency-Key", event.id}, {"User-Agent", "outboxd-mission-log-forwarding/1"}},
                                     body.dump(), settings_.timeout);
    }

private:
    const Settings settings_;
};

}  // namespace mission_log_forwarding

OUTBOX_PLUGIN(mission_log_forwarding::MissionLogForwarding, "mission-log-forwarding");
