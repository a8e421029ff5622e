// parse_config on arbitrary YAML text with an empty environment. A bad file may only ever
// be a ConfigError whose message is one line; anything else escaping (a YAML library
// exception, a crash, a sanitizer report) is a bug. An accepted file holds only values
// inside the documented ranges.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "config/config.hpp"
#include "fuzz_check.hpp"

namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

bool within(milliseconds value, milliseconds low, milliseconds high) { return value >= low && value <= high; }

void check_accepted(const outbox::config::Config& config) {
    const auto& o = config.outbox;
    OUTBOX_FUZZ_CHECK(config.database.pool_size >= 1 && config.database.pool_size <= 256, "database.pool_size range");
    OUTBOX_FUZZ_CHECK(within(o.poll_interval, 10ms, 1h), "outbox.poll_interval range");
    OUTBOX_FUZZ_CHECK(o.batch_size >= 1 && o.batch_size <= 1000, "outbox.batch_size range");
    OUTBOX_FUZZ_CHECK(within(o.lease_duration, 1s, 24h), "outbox.lease_duration range");
    OUTBOX_FUZZ_CHECK(o.max_attempts >= 1 && o.max_attempts <= 1000, "outbox.max_attempts range");
    OUTBOX_FUZZ_CHECK(within(o.initial_backoff, 0ms, 24h), "outbox.initial_backoff range");
    OUTBOX_FUZZ_CHECK(within(o.max_backoff, o.initial_backoff, 7 * 24h), "outbox.max_backoff range");
    OUTBOX_FUZZ_CHECK(o.concurrency >= 1 && o.concurrency <= 1024, "outbox.concurrency range");
    OUTBOX_FUZZ_CHECK(within(o.shutdown_timeout, 0ms, 1h), "outbox.shutdown_timeout range");
    OUTBOX_FUZZ_CHECK(within(o.handler_timeout, 1ms, 24h), "outbox.handler_timeout range");
    OUTBOX_FUZZ_CHECK(within(o.abandon_grace, 0ms, 1h), "outbox.abandon_grace range");
    OUTBOX_FUZZ_CHECK(!o.max_abandoned_threads || (*o.max_abandoned_threads >= 0 && *o.max_abandoned_threads <= 1024),
                      "outbox.max_abandoned_threads range");
    OUTBOX_FUZZ_CHECK(within(config.database.startup_timeout, 0ms, 24h), "database.startup_timeout range");
    OUTBOX_FUZZ_CHECK(within(config.database.call_timeout, 1s, 1h), "database.call_timeout range");
    OUTBOX_FUZZ_CHECK(within(config.database.connect_timeout, 1s, 10min), "database.connect_timeout range");
    OUTBOX_FUZZ_CHECK((config.admin.listen == "off") == !config.admin.listen_address.has_value(),
                      "admin.listen and its parsed address agree");
    OUTBOX_FUZZ_CHECK(config.admin.jwt_secret.empty(), "a JWT secret never comes from the file");
    OUTBOX_FUZZ_CHECK(within(config.admin.jwt_max_lifetime, 1s, 24h), "admin.jwt_max_lifetime range");
    OUTBOX_FUZZ_CHECK(within(config.admin.request_timeout, 100ms, 10min), "admin.request_timeout range");
    OUTBOX_FUZZ_CHECK(config.admin.max_connections_per_client >= 1 && config.admin.max_connections_per_client <= 65536,
                      "admin.max_connections_per_client range");
    OUTBOX_FUZZ_CHECK(config.admin.max_connections >= 1 && config.admin.max_connections <= 65536,
                      "admin.max_connections range");
    OUTBOX_FUZZ_CHECK(config.admin.db_connections_per_company >= 1 &&
                          config.admin.db_connections_per_company <= config.admin.db_connections &&
                          config.admin.db_connections <= 1000,
                      "admin.db_connections_per_company range");
    OUTBOX_FUZZ_CHECK(within(config.admin.metrics_cache, 0ms, 1h), "admin.metrics_cache range");
    OUTBOX_FUZZ_CHECK(config.admin.console_token_header.size() <= 100 &&
                          config.admin.console_token_header.find_first_not_of(
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == std::string::npos,
                      "admin.console_token_header is a header name");
    OUTBOX_FUZZ_CHECK(!config.admin.platform_roles.empty(), "admin.platform_roles is never empty");
    for (const auto& role : config.admin.platform_roles) {
        OUTBOX_FUZZ_CHECK(!role.empty() && role.find(',') == std::string::npos, "a platform role is one name");
    }
    OUTBOX_FUZZ_CHECK(config.admin.jwt_public_key_file.empty() || !config.admin.jwt_audience.empty(),
                      "an RS256 key always comes with an audience");
    for (const auto& [name, handler] : config.handlers) {
        const auto parsed = nlohmann::json::parse(handler.config_json, nullptr, false);
        OUTBOX_FUZZ_CHECK(!parsed.is_discarded() && parsed.is_object(), "handler config is a JSON object");
        OUTBOX_FUZZ_CHECK(!handler.timeout || *handler.timeout > 0ms, "handler timeout is positive");
        OUTBOX_FUZZ_CHECK(config.handler(name).timeout.value_or(0ms) > 0ms, "a resolved handler timeout is set");
        if (handler.max_concurrency) OUTBOX_FUZZ_CHECK(*handler.max_concurrency >= 1, "max_concurrency positive");
        if (handler.rate_limit_per_second) {
            OUTBOX_FUZZ_CHECK(*handler.rate_limit_per_second > 0, "rate_limit_per_second positive");
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const outbox::config::EnvLookup no_environment = [](const std::string&) -> std::optional<std::string> {
        return std::nullopt;
    };
    try {
        check_accepted(outbox::config::parse_config(text, "fuzz.yaml", no_environment));
    } catch (const outbox::config::ConfigError& e) {
        const std::string_view message = e.what();
        OUTBOX_FUZZ_CHECK(!message.empty(), "a config error says something");
        OUTBOX_FUZZ_CHECK(message.find('\n') == std::string_view::npos, "a config error is one line");
    }
    return 0;
}
