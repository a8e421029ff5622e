// category-classification: asks an AI classifier for a website's category and stores it.
//
// Event WebsiteRegistered, payload {"website_id": "<uuid>", "domain": "example.com"}.
// First reads the website's category through ctx.db(): a website that already has one is
// left alone without calling the classifier (the API is rate-limited and paid per call).
// Otherwise POST <endpoint> {"domain": ...} with Authorization: Bearer <$api_key_env> and
// Idempotency-Key: <event_id>; the answer {"category": "..."} is written with
// UPDATE website SET category = $1 WHERE id = $2 AND category IS NULL, in the handler's
// transaction, so it commits together with the consumption record and never overwrites a
// category set meanwhile.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include <outbox/sdk.hpp>
#include <outbox/sdk/http.hpp>

namespace category_classification {
namespace {

using outbox::sdk::http::Endpoint;
using outbox::sdk::http::InvalidConfig;
using outbox::sdk::http::parse_duration;
using outbox::sdk::http::parse_endpoint;
using std::chrono::milliseconds;

constexpr milliseconds kDefaultTimeout{std::chrono::seconds{10}};
constexpr std::size_t kMaxCategoryLength = 100;

struct Settings {
    Endpoint endpoint;
    std::string api_key;
    milliseconds timeout = kDefaultTimeout;
};

Settings parse_settings(const std::string& config_json) {
    const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, false);
    if (!config.is_object()) throw InvalidConfig("config: expected an object");
    for (const auto& [key, value] : config.items()) {
        if (key != "endpoint" && key != "api_key_env" && key != "timeout") {
            throw InvalidConfig("config." + key + ": unknown key (allowed: endpoint, api_key_env, timeout)");
        }
    }
    if (!config.contains("endpoint") || !config["endpoint"].is_string()) {
        throw InvalidConfig("config.endpoint: required, the classifier URL");
    }
    if (!config.contains("api_key_env") || !config["api_key_env"].is_string() ||
        config["api_key_env"].get<std::string>().empty()) {
        throw InvalidConfig("config.api_key_env: required, the name of the environment variable holding the API key");
    }
    Settings settings;
    settings.endpoint = parse_endpoint(config["endpoint"].get<std::string>(), "config.endpoint");
    const std::string variable = config["api_key_env"].get<std::string>();
    // Read once at start-up: a missing key is a deployment error to refuse loudly, not a
    // failure to discover event by event.
    const char* key = std::getenv(variable.c_str());
    if (key == nullptr || *key == '\0') {
        throw InvalidConfig("config.api_key_env: environment variable " + variable + " is not set or empty");
    }
    settings.api_key = key;
    if (config.contains("timeout")) settings.timeout = parse_duration(config["timeout"], "config.timeout");
    return settings;
}

bool valid_uuid(const std::string& text) {
    if (text.size() != 36) return false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash != (c == '-')) return false;
        if (!dash && !std::isxdigit(static_cast<unsigned char>(c))) return false;
    }
    return true;
}

// Only a short printable string is stored; anything else means the remote misbehaved.
std::string category_from(const nlohmann::json& answer) {
    if (!answer.is_object() || !answer.contains("category") || !answer["category"].is_string()) {
        throw outbox::sdk::RetryableError("BAD_RESPONSE", "the classifier's answer has no category string");
    }
    std::string category = answer["category"].get<std::string>();
    const bool printable = std::all_of(category.begin(), category.end(),
                                       [](char c) { return static_cast<unsigned char>(c) >= 0x20 && c != 0x7f; });
    if (category.empty() || category.size() > kMaxCategoryLength || !printable) {
        throw outbox::sdk::RetryableError("BAD_RESPONSE", "the classifier's category is empty, too long or not text");
    }
    return category;
}

}  // namespace

class CategoryClassification final : public outbox::sdk::Handler {
public:
    /// Throws InvalidConfig for a missing or bad key and when the API key variable is unset;
    /// the host then refuses the plugin with one log line.
    explicit CategoryClassification(const std::string& config_json) : settings_(parse_settings(config_json)) {}

    [[nodiscard]] std::string handler_name() const override { return "category-classification"; }
    [[nodiscard]] std::vector<std::string> event_types() const override { return {"WebsiteRegistered"}; }

    void handle(const outbox::sdk::Event& event, outbox::sdk::Context& ctx) override {
        const nlohmann::json payload = nlohmann::json::parse(event.payload_json, nullptr, false);
        const auto text = [&](const char* name) {
            return payload.is_object() && payload.contains(name) && payload[name].is_string()
                       ? payload[name].get<std::string>()
                       : std::string();
        };
        const std::string website_id = text("website_id");
        const std::string domain = text("domain");
        if (!valid_uuid(website_id) || domain.empty() || domain.size() > 253) {
            throw outbox::sdk::NonRetryableError("BAD_PAYLOAD", "website_id must be a UUID and domain a host name");
        }

        const auto current =
            ctx.db().exec("SELECT category IS NOT NULL FROM website WHERE id = $1::uuid", {website_id});
        if (current.empty()) {
            ctx.log(outbox::sdk::LogLevel::Info, "website not found; nothing to classify");
            return;
        }
        if (current[0][0] == "t") {
            ctx.log(outbox::sdk::LogLevel::Info, "website already classified; classifier not called");
            return;
        }

        const httplib::Headers headers{{"Authorization", "Bearer " + settings_.api_key},
                                       {"Idempotency-Key", event.id},
                                       {"User-Agent", "outboxd-category-classification/1"}};
        const httplib::Response response = outbox::sdk::http::post_json(
            ctx, settings_.endpoint, headers, nlohmann::json{{"domain", domain}}.dump(), settings_.timeout);
        const std::string category = category_from(outbox::sdk::http::json_body(response));
        const auto changed = ctx.db().exec(
            "UPDATE website SET category = $1 WHERE id = $2::uuid AND category IS NULL RETURNING 1",
            {category, website_id});
        if (changed.empty()) {
            ctx.log(outbox::sdk::LogLevel::Info, "website classified meanwhile; left unchanged");
        }
    }

private:
    const Settings settings_;
};

}  // namespace category_classification

OUTBOX_PLUGIN(category_classification::CategoryClassification, "category-classification");
