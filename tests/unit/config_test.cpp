#include "config/config.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/contains.hpp"

namespace {

using namespace std::chrono_literals;
using outbox::config::Config;
using outbox::config::ConfigError;
using outbox::config::EnvLookup;
using outbox::config::load_config;
using outbox::config::parse_config;

EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
        const auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
    };
}

const EnvLookup kNoEnv = env_of({});

// The ConfigError message for `yaml` (as file "outboxd.yaml") with `env`, or a test failure.
std::string error_of(const std::string& yaml, const EnvLookup& env = kNoEnv) {
    try {
        parse_config(yaml, "outboxd.yaml", env);
    } catch (const ConfigError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        return message;
    }
    ADD_FAILURE() << "expected a ConfigError for:\n" << yaml;
    return {};
}

using outbox::test::contains;

TEST(Config, NoFileAndEmptyEnvironmentGiveTheDocumentedDefaults) {
    const Config c = load_config(std::nullopt, kNoEnv);
    EXPECT_EQ(c.database.url, "");
    EXPECT_EQ(c.database.pool_size, 4);
    EXPECT_TRUE(c.outbox.enabled);
    EXPECT_EQ(c.outbox.poll_interval, 1s);
    EXPECT_EQ(c.outbox.batch_size, 20);
    EXPECT_EQ(c.outbox.lease_duration, 5min);
    EXPECT_EQ(c.outbox.max_attempts, 8);
    EXPECT_EQ(c.outbox.initial_backoff, 1s);
    EXPECT_EQ(c.outbox.max_backoff, 5min);
    EXPECT_EQ(c.outbox.concurrency, 8);
    EXPECT_EQ(c.outbox.shutdown_timeout, 30s);
    EXPECT_EQ(c.outbox.retention, 24h * 7);
    EXPECT_EQ(c.outbox.host_id, "");
    EXPECT_EQ(c.plugins.dir, "/usr/lib/outboxd/plugins");
    EXPECT_EQ(c.admin.listen, "127.0.0.1:8080");
    EXPECT_EQ(c.admin.jwt_secret, "");
    EXPECT_EQ(c.admin.jwt_public_key_file, "");
    EXPECT_EQ(c.admin.jwt_max_lifetime, 1h);
    EXPECT_EQ(c.log.level, "info");
    EXPECT_EQ(c.log.format, "text");
    EXPECT_TRUE(c.handlers.empty());
}

TEST(Config, EmptyFileAndEmptySectionsGiveTheDefaults) {
    EXPECT_EQ(parse_config("", "x.yaml", kNoEnv).outbox.batch_size, 20);
    EXPECT_EQ(parse_config("# all commented out\n", "x.yaml", kNoEnv).outbox.batch_size, 20);
    const Config c = parse_config("outbox:\nlog:\nhandlers:\n  quiet:\n", "x.yaml", kNoEnv);
    EXPECT_EQ(c.outbox.batch_size, 20);
    ASSERT_EQ(c.handlers.count("quiet"), 1u);
    EXPECT_EQ(c.handlers.at("quiet").config_json, "{}");
}

TEST(Config, FileValuesAreRead) {
    const Config c = parse_config(R"(
database:
  url: postgresql://outboxd@db:5432/app
  pool_size: 16
outbox:
  enabled: false
  poll_interval: 250ms
  batch_size: 50
  lease_duration: 2m
  max_attempts: 3
  initial_backoff: 500ms
  max_backoff: 1h
  concurrency: 32
  shutdown_timeout: 10s
  retention: 30d
  host_id: worker-1
plugins:
  dir: /opt/plugins
admin:
  listen: 0.0.0.0:9090
  jwt_public_key_file: /etc/outboxd/jwt.pem
  jwt_issuer: https://auth.example.com
  jwt_audience: outboxd
log:
  level: debug
  format: json
handlers:
  category-classification:
    max_concurrency: 1
    rate_limit_per_second: 2.5
    timeout: 10s
)",
                                  "outboxd.yaml", kNoEnv);
    EXPECT_EQ(c.database.url, "postgresql://outboxd@db:5432/app");
    EXPECT_EQ(c.database.pool_size, 16);
    EXPECT_FALSE(c.outbox.enabled);
    EXPECT_EQ(c.outbox.poll_interval, 250ms);
    EXPECT_EQ(c.outbox.batch_size, 50);
    EXPECT_EQ(c.outbox.lease_duration, 2min);
    EXPECT_EQ(c.outbox.max_attempts, 3);
    EXPECT_EQ(c.outbox.initial_backoff, 500ms);
    EXPECT_EQ(c.outbox.max_backoff, 1h);
    EXPECT_EQ(c.outbox.concurrency, 32);
    EXPECT_EQ(c.outbox.shutdown_timeout, 10s);
    EXPECT_EQ(c.outbox.retention, 24h * 30);
    EXPECT_EQ(c.outbox.host_id, "worker-1");
    EXPECT_EQ(c.plugins.dir, "/opt/plugins");
    EXPECT_EQ(c.admin.listen, "0.0.0.0:9090");
    EXPECT_EQ(c.admin.jwt_public_key_file, "/etc/outboxd/jwt.pem");
    EXPECT_EQ(c.admin.jwt_issuer, "https://auth.example.com");
    EXPECT_EQ(c.admin.jwt_audience, "outboxd");
    EXPECT_EQ(c.log.level, "debug");
    EXPECT_EQ(c.log.format, "json");
    const auto handler = c.handler("category-classification");
    EXPECT_EQ(handler.max_concurrency, 1);
    EXPECT_EQ(handler.rate_limit_per_second, 2.5);
    EXPECT_EQ(handler.timeout, 10s);
    EXPECT_EQ(handler.config_json, "{}");
}

TEST(Config, EnvironmentOverridesTheFile) {
    const std::string yaml = "outbox:\n  batch_size: 50\n  poll_interval: 5s\nlog:\n  level: debug\n";
    const Config c = parse_config(yaml, "outboxd.yaml",
                                  env_of({{"OUTBOX_BATCH_SIZE", "7"},
                                          {"OUTBOX_POLL_INTERVAL", "100ms"},
                                          {"OUTBOX_DATABASE_URL", "postgresql://env@db/app"},
                                          {"OUTBOX_DB_POOL_SIZE", "9"},
                                          {"OUTBOX_DATABASE_POOL_MODE", "transaction"},
                                          {"OUTBOX_DATABASE_SESSION_URL", "postgresql://env@db-direct/app"},
                                          {"OUTBOX_ENABLED", "false"},
                                          {"OUTBOX_LEASE_DURATION", "30s"},
                                          {"OUTBOX_MAX_ATTEMPTS", "2"},
                                          {"OUTBOX_INITIAL_BACKOFF", "2s"},
                                          {"OUTBOX_MAX_BACKOFF", "10m"},
                                          {"OUTBOX_CONCURRENCY", "3"},
                                          {"OUTBOX_SHUTDOWN_TIMEOUT", "0s"},
                                          {"OUTBOX_RETENTION", "1d"},
                                          {"OUTBOX_HOST_ID", "pod-7"},
                                          {"OUTBOX_PLUGIN_DIR", "/env/plugins"},
                                          {"OUTBOX_ADMIN_LISTEN", "off"},
                                          {"OUTBOX_ADMIN_JWT_SECRET", "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t"},
                                          {"OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE", "/env/key.pem"},
                                          {"OUTBOX_ADMIN_JWT_ISSUER", "env-issuer"},
                                          {"OUTBOX_ADMIN_JWT_AUDIENCE", "env-audience"},
                                          {"OUTBOX_ADMIN_JWT_MAX_LIFETIME", "15m"},
                                          {"OUTBOX_LOG_LEVEL", "warn"},
                                          {"OUTBOX_LOG_FORMAT", "json"}}));
    EXPECT_EQ(c.outbox.batch_size, 7);
    EXPECT_EQ(c.outbox.poll_interval, 100ms);
    EXPECT_EQ(c.database.url, "postgresql://env@db/app");
    EXPECT_EQ(c.database.pool_size, 9);
    EXPECT_EQ(c.database.pool_mode, "transaction");
    EXPECT_EQ(c.database.session_url, "postgresql://env@db-direct/app");
    EXPECT_FALSE(c.outbox.enabled);
    EXPECT_EQ(c.outbox.lease_duration, 30s);
    EXPECT_EQ(c.outbox.max_attempts, 2);
    EXPECT_EQ(c.outbox.initial_backoff, 2s);
    EXPECT_EQ(c.outbox.max_backoff, 10min);
    EXPECT_EQ(c.outbox.concurrency, 3);
    EXPECT_EQ(c.outbox.shutdown_timeout, 0s);
    EXPECT_EQ(c.outbox.retention, 24h);
    EXPECT_EQ(c.outbox.host_id, "pod-7");
    EXPECT_EQ(c.plugins.dir, "/env/plugins");
    EXPECT_EQ(c.admin.listen, "off");
    EXPECT_EQ(c.admin.jwt_secret, "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t");
    EXPECT_EQ(c.admin.jwt_public_key_file, "/env/key.pem");
    EXPECT_EQ(c.admin.jwt_issuer, "env-issuer");
    EXPECT_EQ(c.admin.jwt_audience, "env-audience");
    EXPECT_EQ(c.admin.jwt_max_lifetime, 15min);
    EXPECT_EQ(c.log.level, "warn");
    EXPECT_EQ(c.log.format, "json");
}

TEST(Config, TheConsoleIsOnByDefaultAndItsProxyHeaderIsOptional) {
    const Config defaults = parse_config("", "x.yaml", env_of({}));
    EXPECT_TRUE(defaults.admin.console);
    EXPECT_EQ(defaults.admin.console_token_header, "");
    const Config file = parse_config("admin:\n  console: false\n  console_token_header: X-Forwarded-Access-Token\n",
                                     "x.yaml", env_of({}));
    EXPECT_FALSE(file.admin.console);
    EXPECT_EQ(file.admin.console_token_header, "X-Forwarded-Access-Token");
    const Config env = parse_config("", "x.yaml",
                                    env_of({{"OUTBOX_ADMIN_CONSOLE", "0"},
                                            {"OUTBOX_ADMIN_CONSOLE_TOKEN_HEADER", "X-Auth-Request-Access-Token"}}));
    EXPECT_FALSE(env.admin.console);
    EXPECT_EQ(env.admin.console_token_header, "X-Auth-Request-Access-Token");
}

TEST(Config, TelemetryTakesAnHttpEndpointAndAServiceNameAndRefusesAnythingElseInOneLine) {
    const Config defaults = parse_config("", "x.yaml", kNoEnv);
    EXPECT_EQ(defaults.telemetry.otlp_endpoint, "") << "no spans unless asked";
    EXPECT_EQ(defaults.telemetry.service_name, "outboxd");
    for (const std::string good : {"http://127.0.0.1:4318/v1/traces", "http://collector.internal:4318/v1/traces",
                                   "http://[::1]:4318/", "http://otel-agent:1/x?y=z"}) {
        EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_TELEMETRY_OTLP_ENDPOINT", good}})).telemetry.otlp_endpoint,
                  good);
    }
    const Config file = parse_config("telemetry:\n  otlp_endpoint: http://127.0.0.1:4318/v1/traces\n"
                                     "  service_name: billing-outbox\n", "x.yaml", kNoEnv);
    EXPECT_EQ(file.telemetry.service_name, "billing-outbox");
    for (const std::string& bad : std::vector<std::string>{"https://127.0.0.1:4318/v1/traces", "http://127.0.0.1/v1/traces",
                                  "http://127.0.0.1:4318", "http://127.0.0.1:0/v1/traces", "http://127.0.0.1:65536/x",
                                  "http://user:pw@127.0.0.1:4318/x", "http://127.0.0.1:43a8/x", "127.0.0.1:4318/x",
                                  "http://h:1/a b", "http://h:1/" + std::string(5000, 'a')}) {
        EXPECT_THAT(error_of("telemetry:\n  otlp_endpoint: \"" + bad + "\"\n"), ::testing::HasSubstr("telemetry.otlp_endpoint"))
            << bad;
    }
    EXPECT_THAT(error_of("telemetry:\n  service_name: \"\"\n"), ::testing::HasSubstr("telemetry.service_name"));
    EXPECT_THAT(error_of("telemetry:\n  unknown: 1\n"), ::testing::HasSubstr("telemetry.unknown"));
}

TEST(Config, EnvironmentBooleansAlsoAcceptOneZeroYesNo) {
    for (const auto& [text, expected] : std::map<std::string, bool>{
             {"1", true}, {"0", false}, {"yes", true}, {"no", false}, {"TRUE", true}, {"False", false}}) {
        EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_ENABLED", text}})).outbox.enabled, expected) << text;
    }
}

TEST(Config, FileBooleansAreOnlyTrueOrFalse) {
    const std::string message = error_of("outbox:\n  enabled: yes\n");
    EXPECT_TRUE(contains(message, "outbox.enabled = \"yes\" (from outboxd.yaml:2)")) << message;
    EXPECT_TRUE(contains(message, "expected true or false")) << message;
}

struct BadValue {
    std::string yaml;  // file text, or empty when the value comes from `env`
    std::map<std::string, std::string> env;
    std::string key_value_source;  // e.g. `outbox.batch_size = "0" (from OUTBOX_BATCH_SIZE)`
    std::string allowed;           // a fragment of what is allowed
};

TEST(Config, OutOfRangeAndMalformedValuesNameTheKeySourceValueAndWhatIsAllowed) {
    const std::vector<BadValue> cases{
        {"",
         {{"OUTBOX_POLL_INTERVAL", "abc"}},
         R"(outbox.poll_interval = "abc" (from OUTBOX_POLL_INTERVAL))",
         "expected a duration such as 250ms, 1s, 5m"},
        {"", {{"OUTBOX_POLL_INTERVAL", "9ms"}}, R"(outbox.poll_interval = "9ms")", "from 10ms to 1h"},
        {"outbox:\n  poll_interval: 61m\n",
         {},
         R"(outbox.poll_interval = "61m" (from outboxd.yaml:2))",
         "from 10ms to 1h"},
        {"",
         {{"OUTBOX_BATCH_SIZE", "0"}},
         R"(outbox.batch_size = "0" (from OUTBOX_BATCH_SIZE))",
         "expected an integer from 1 to 1000"},
        {"outbox:\n  batch_size: 1001\n", {}, R"(outbox.batch_size = "1001" (from outboxd.yaml:2))", "from 1 to 1000"},
        {"", {{"OUTBOX_BATCH_SIZE", "20.5"}}, R"(outbox.batch_size = "20.5")", "from 1 to 1000"},
        {"",
         {{"OUTBOX_BATCH_SIZE", "99999999999999999999"}},
         R"(outbox.batch_size = "99999999999999999999")",
         "from 1 to 1000"},
        {"", {{"OUTBOX_LEASE_DURATION", "999ms"}}, R"(outbox.lease_duration = "999ms")", "from 1s to 1d"},
        {"", {{"OUTBOX_LEASE_DURATION", "25h"}}, R"(outbox.lease_duration = "25h")", "from 1s to 1d"},
        {"", {{"OUTBOX_MAX_ATTEMPTS", "0"}}, R"(outbox.max_attempts = "0")", "from 1 to 1000"},
        {"", {{"OUTBOX_MAX_ATTEMPTS", "1001"}}, R"(outbox.max_attempts = "1001")", "from 1 to 1000"},
        {"", {{"OUTBOX_INITIAL_BACKOFF", "-1s"}}, R"(outbox.initial_backoff = "-1s")", "expected a duration"},
        {"", {{"OUTBOX_INITIAL_BACKOFF", "25h"}}, R"(outbox.initial_backoff = "25h")", "from 0ms to 1d"},
        {"", {{"OUTBOX_MAX_BACKOFF", "8d"}}, R"(outbox.max_backoff = "8d" (from OUTBOX_MAX_BACKOFF))", "to 7d"},
        {"",
         {{"OUTBOX_MAX_BACKOFF", "500ms"}},
         R"(outbox.max_backoff = "500ms" (from OUTBOX_MAX_BACKOFF))",
         "must be at least outbox.initial_backoff (1s, from default)"},
        {"outbox:\n  initial_backoff: 10m\n",
         {},
         R"(outbox.max_backoff = "5m" (from default))",
         "at least outbox.initial_backoff (10m, from outboxd.yaml:2)"},
        {"", {{"OUTBOX_CONCURRENCY", "0"}}, R"(outbox.concurrency = "0")", "from 1 to 1024"},
        {"", {{"OUTBOX_CONCURRENCY", "1025"}}, R"(outbox.concurrency = "1025")", "from 1 to 1024"},
        {"", {{"OUTBOX_DB_POOL_SIZE", "0"}}, R"(database.pool_size = "0" (from OUTBOX_DB_POOL_SIZE))", "from 1 to 256"},
        {"database:\n  pool_size: 257\n", {}, R"(database.pool_size = "257" (from outboxd.yaml:2))", "from 1 to 256"},
        {"", {{"OUTBOX_SHUTDOWN_TIMEOUT", "61m"}}, R"(outbox.shutdown_timeout = "61m")", "from 0ms to 1h"},
        {"", {{"OUTBOX_RETENTION", "59s"}}, R"(outbox.retention = "59s")", "from 1m to 3650d"},
        {"", {{"OUTBOX_RETENTION", "3651d"}}, R"(outbox.retention = "3651d")", "from 1m to 3650d"},
        {"", {{"OUTBOX_ENABLED", "maybe"}}, R"(outbox.enabled = "maybe" (from OUTBOX_ENABLED))", "true or false"},
        {"",
         {{"OUTBOX_ADMIN_LISTEN", "localhost"}},
         R"(admin.listen = "localhost" (from OUTBOX_ADMIN_LISTEN))",
         "off or host:port"},
        {"", {{"OUTBOX_ADMIN_LISTEN", "127.0.0.1:0"}}, R"(admin.listen = "127.0.0.1:0")", "port from 1 to 65535"},
        {"", {{"OUTBOX_ADMIN_LISTEN", "127.0.0.1:65536"}}, R"(admin.listen = "127.0.0.1:65536")", "1 to 65535"},
        {"", {{"OUTBOX_ADMIN_LISTEN", ":8080"}}, R"(admin.listen = ":8080")", "host:port"},
        {"", {{"OUTBOX_ADMIN_CONSOLE", "on"}}, R"(admin.console = "on" (from OUTBOX_ADMIN_CONSOLE))", "true or false"},
        {"admin:\n  console_token_header: \"X-Token: x\"\n",
         {},
         R"(admin.console_token_header = "X-Token: x" (from outboxd.yaml:2))",
         "expected an HTTP header name"},
        {"admin:\n  listen: 127.0.0.1:http\n",
         {},
         R"(admin.listen = "127.0.0.1:http" (from outboxd.yaml:2))",
         "host:port"},
        {"",
         {{"OUTBOX_LOG_LEVEL", "verbose"}},
         R"(log.level = "verbose" (from OUTBOX_LOG_LEVEL))",
         "expected one of trace, debug, info, warn, error"},
        {"log:\n  format: xml\n", {}, R"(log.format = "xml" (from outboxd.yaml:2))", "expected one of text, json"},
        {"",
         {{"OUTBOX_DATABASE_POOL_MODE", "statement"}},
         R"(database.pool_mode = "statement" (from OUTBOX_DATABASE_POOL_MODE))",
         "expected one of session, transaction"},
        {"handlers:\n  h:\n    timeout: 0ms\n",
         {},
         R"(handlers.h.timeout = "0ms" (from outboxd.yaml:3))",
         "from 1ms to 1d"},
        {"handlers:\n  h:\n    timeout: 25h\n", {}, R"(handlers.h.timeout = "25h")", "from 1ms to 1d"},
        {"handlers:\n  h:\n    max_concurrency: 0\n",
         {},
         R"(handlers.h.max_concurrency = "0" (from outboxd.yaml:3))",
         "from 1 to 10000"},
        {"handlers:\n  h:\n    max_concurrency: 10001\n",
         {},
         R"(handlers.h.max_concurrency = "10001")",
         "from 1 to 10000"},
        {"handlers:\n  h:\n    rate_limit_per_second: 0\n",
         {},
         R"(handlers.h.rate_limit_per_second = "0")",
         "greater than 0 and at most 100000"},
        {"handlers:\n  h:\n    rate_limit_per_second: -1\n",
         {},
         R"(handlers.h.rate_limit_per_second = "-1")",
         "greater than 0"},
        {"handlers:\n  h:\n    rate_limit_per_second: 100001\n",
         {},
         R"(handlers.h.rate_limit_per_second = "100001")",
         "at most 100000"},
        {"handlers:\n  h:\n    rate_limit_per_second: fast\n",
         {},
         R"(handlers.h.rate_limit_per_second = "fast")",
         "greater than 0"},
        {"handlers:\n  h:\n    rate_limit_per_second: .inf\n",
         {},
         R"(handlers.h.rate_limit_per_second = ".inf")",
         "at most 100000"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.key_value_source);
        const std::string message = error_of(c.yaml, env_of(c.env));
        EXPECT_TRUE(contains(message, c.key_value_source)) << message;
        EXPECT_TRUE(contains(message, c.allowed)) << message;
    }
}

TEST(Config, BoundaryValuesAreAccepted) {
    const Config low = parse_config("", "x.yaml",
                                    env_of({{"OUTBOX_POLL_INTERVAL", "10ms"},
                                            {"OUTBOX_BATCH_SIZE", "1"},
                                            {"OUTBOX_LEASE_DURATION", "1s"},
                                            {"OUTBOX_MAX_ATTEMPTS", "1"},
                                            {"OUTBOX_INITIAL_BACKOFF", "0s"},
                                            {"OUTBOX_MAX_BACKOFF", "0s"},
                                            {"OUTBOX_CONCURRENCY", "1"},
                                            {"OUTBOX_DB_POOL_SIZE", "1"},
                                            {"OUTBOX_SHUTDOWN_TIMEOUT", "0s"},
                                            {"OUTBOX_RETENTION", "1m"},
                                            {"OUTBOX_ADMIN_LISTEN", "h:1"}}));
    EXPECT_EQ(low.outbox.poll_interval, 10ms);
    EXPECT_EQ(low.outbox.max_backoff, 0ms);
    EXPECT_EQ(low.outbox.retention, 1min);
    const Config high = parse_config(
        "handlers:\n  h:\n    max_concurrency: 10000\n    rate_limit_per_second: 100000\n    timeout: 24h\n", "x.yaml",
        env_of({{"OUTBOX_POLL_INTERVAL", "1h"},
                {"OUTBOX_BATCH_SIZE", "1000"},
                {"OUTBOX_LEASE_DURATION", "24h"},
                {"OUTBOX_MAX_ATTEMPTS", "1000"},
                {"OUTBOX_INITIAL_BACKOFF", "24h"},
                {"OUTBOX_MAX_BACKOFF", "7d"},
                {"OUTBOX_CONCURRENCY", "1024"},
                {"OUTBOX_DB_POOL_SIZE", "256"},
                {"OUTBOX_SHUTDOWN_TIMEOUT", "1h"},
                {"OUTBOX_RETENTION", "3650d"},
                {"OUTBOX_ADMIN_LISTEN", "[::1]:65535"}}));
    EXPECT_EQ(high.outbox.batch_size, 1000);
    EXPECT_EQ(high.outbox.max_backoff, 24h * 7);
    EXPECT_EQ(high.outbox.retention, 24h * 3650);
    EXPECT_EQ(high.admin.listen, "[::1]:65535");
    EXPECT_EQ(high.handler("h").max_concurrency, 10000);
    EXPECT_EQ(high.handler("h").rate_limit_per_second, 100000.0);
    EXPECT_EQ(high.handler("h").timeout, 24h);
}

TEST(Config, ValueWithANewlineIsShownEscapedOnOneLine) {
    const std::string message = error_of("", env_of({{"OUTBOX_LOG_LEVEL", "info\nerror"}}));
    EXPECT_TRUE(contains(message, R"(log.level = "info\nerror")")) << message;
}

// A handler name is a key of the file, so it can hold any character a quoted YAML key can.
TEST(Config, AHandlerNameWithControlCharactersStillGivesAOneLineError) {
    const std::string message = error_of("handlers:\n  \"a\\nb\\rc\":\n    max_concurrency: 0\n");
    EXPECT_TRUE(contains(message, R"(handlers.a?b?c.max_concurrency = "0")")) << message;
    EXPECT_EQ(message.find('\r'), std::string::npos) << message;
}

TEST(Config, UnknownKeyIsRejectedWithItsLineAndASuggestion) {
    const std::string message = error_of("outbox:\n  batch_size: 5\n  pol_interval: 1s\n");
    EXPECT_TRUE(contains(message, "outbox.pol_interval (from outboxd.yaml:3): unknown key")) << message;
    EXPECT_TRUE(contains(message, "did you mean poll_interval?")) << message;
}

TEST(Config, UnknownSectionAndUnknownHandlerKeyAreRejected) {
    const std::string section = error_of("outbx:\n  batch_size: 5\n");
    EXPECT_TRUE(contains(section, "outbx (from outboxd.yaml:1): unknown key")) << section;
    EXPECT_TRUE(contains(section, "did you mean outbox?")) << section;
    const std::string handler = error_of("handlers:\n  h:\n    timout: 5s\n");
    EXPECT_TRUE(contains(handler, "handlers.h.timout (from outboxd.yaml:3): unknown key")) << handler;
    const std::string far = error_of("log:\n  colour: red\n");
    EXPECT_TRUE(contains(far, "log.colour (from outboxd.yaml:2): unknown key; allowed here: level, format")) << far;
}

TEST(Config, DuplicateKeyIsRejected) {
    const std::string message = error_of("outbox:\n  batch_size: 5\n  batch_size: 6\n");
    EXPECT_TRUE(contains(message, "outbox.batch_size (from outboxd.yaml:3): duplicate key")) << message;
}

TEST(Config, YamlSyntaxErrorNamesFileAndLine) {
    const std::string message = error_of("outbox:\n  batch_size: [1, 2\n  poll_interval: 1s\n");
    EXPECT_TRUE(contains(message, "outboxd.yaml:")) << message;
    EXPECT_TRUE(contains(message, "YAML syntax error")) << message;
    const std::string tabs = error_of("outbox:\n  batch_size: 5\n bad: [\n");
    EXPECT_TRUE(contains(tabs, "outboxd.yaml:3")) << tabs;
}

TEST(Config, MoreThanOneYamlDocumentIsRejected) {
    const std::string message = error_of("outbox:\n  batch_size: 5\n---\noutbox:\n  batch_size: 6\n");
    EXPECT_TRUE(contains(message, "one YAML document")) << message;
}

TEST(Config, ALoneCommaIsRefusedInsteadOfParsedAsEndlessEmptyDocuments) {
    EXPECT_TRUE(contains(error_of(","), "one YAML document"));  // yaml-cpp's LoadAll never returns on it
}

TEST(Config, WrongShapesAreRejected) {
    const std::string map_for_scalar = error_of("outbox:\n  poll_interval: { value: 1s }\n");
    EXPECT_TRUE(
        contains(map_for_scalar, "outbox.poll_interval (from outboxd.yaml:2): expected a single value, got a mapping"))
        << map_for_scalar;
    const std::string list_for_scalar = error_of("database:\n  url: [a, b]\n");
    EXPECT_TRUE(contains(list_for_scalar, "database.url (from outboxd.yaml:2): expected a single value, got a list"))
        << list_for_scalar;
    const std::string scalar_for_section = error_of("outbox: fast\n");
    EXPECT_TRUE(contains(scalar_for_section, "outbox (from outboxd.yaml:1): expected a mapping")) << scalar_for_section;
    const std::string top_level_list = error_of("- outbox\n");
    EXPECT_TRUE(contains(top_level_list, "expected a mapping of sections, got a list")) << top_level_list;
    const std::string empty_value = error_of("outbox:\n  batch_size:\n");
    EXPECT_TRUE(contains(empty_value, "outbox.batch_size (from outboxd.yaml:2): expected a single value, got nothing"))
        << empty_value;
    const std::string config_list = error_of("handlers:\n  h:\n    config: [1, 2]\n");
    EXPECT_TRUE(contains(config_list, "handlers.h.config (from outboxd.yaml:3): expected a mapping")) << config_list;
}

TEST(Config, JwtSecretInTheFileIsRejectedWithoutEchoingIt) {
    const std::string message = error_of("admin:\n  jwt_secret: hunter2-very-secret\n");
    EXPECT_TRUE(contains(message, "admin.jwt_secret (from outboxd.yaml:2)")) << message;
    EXPECT_TRUE(contains(message, "OUTBOX_ADMIN_JWT_SECRET")) << message;
    EXPECT_FALSE(contains(message, "hunter2")) << "the secret must not be printed: " << message;
}

TEST(Config, AJwtSecretShorterThan32BytesIsAnErrorNamingTheVariableButNotTheSecret) {
    const std::string short_secret = "hunter2-hunter2-hunter2-hunter2";  // 31 bytes
    const std::string message = error_of("", env_of({{"OUTBOX_ADMIN_JWT_SECRET", short_secret}}));
    EXPECT_TRUE(contains(message, "OUTBOX_ADMIN_JWT_SECRET is shorter than 32 bytes")) << message;
    EXPECT_FALSE(contains(message, "hunter2")) << "the secret must not be printed: " << message;

    const std::string long_enough = short_secret + "!";
    EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_ADMIN_JWT_SECRET", long_enough}})).admin.jwt_secret,
              long_enough);
    EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_ADMIN_JWT_SECRET", ""}})).admin.jwt_secret, "")
        << "an empty variable configures no HS256 key at all (every token is refused)";
}

TEST(Config, JwtMaxLifetimeIsADurationFromTheFileOrTheEnvironment) {
    EXPECT_EQ(parse_config("admin:\n  jwt_max_lifetime: 10m\n", "x.yaml", kNoEnv).admin.jwt_max_lifetime, 10min);
    EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_ADMIN_JWT_MAX_LIFETIME", "2h"}})).admin.jwt_max_lifetime, 2h);
    const std::string too_long = error_of("admin:\n  jwt_max_lifetime: 30d\n");
    EXPECT_TRUE(contains(too_long, "admin.jwt_max_lifetime = \"30d\" (from outboxd.yaml:2)")) << too_long;
    EXPECT_TRUE(contains(too_long, "from 1s to 1d")) << too_long;
    const std::string not_a_duration = error_of("", env_of({{"OUTBOX_ADMIN_JWT_MAX_LIFETIME", "forever"}}));
    EXPECT_TRUE(contains(not_a_duration, "admin.jwt_max_lifetime = \"forever\" (from OUTBOX_ADMIN_JWT_MAX_LIFETIME)"))
        << not_a_duration;
}

TEST(Config, AdminListenerLimitsAndPlatformRoles) {
    const auto defaults = parse_config("", "x.yaml", kNoEnv).admin;
    EXPECT_EQ(defaults.request_timeout, 10s);
    EXPECT_EQ(defaults.max_connections_per_client, 32);
    EXPECT_EQ(defaults.max_connections, 512);
    EXPECT_EQ(defaults.metrics_cache, 5s);
    EXPECT_EQ(defaults.platform_roles, std::vector<std::string>{"PLATFORM_ADMIN"});
    const auto set = parse_config(
        "admin:\n  request_timeout: 3s\n  max_connections_per_client: 4\n  platform_roles: [SRE, ops-lead]\n",
        "x.yaml", kNoEnv);
    EXPECT_EQ(set.admin.request_timeout, 3s);
    EXPECT_EQ(set.admin.max_connections_per_client, 4);
    EXPECT_EQ(set.admin.platform_roles, (std::vector<std::string>{"SRE", "ops-lead"}));
    EXPECT_EQ(parse_config("", "x.yaml", env_of({{"OUTBOX_ADMIN_PLATFORM_ROLES", "A, B"}})).admin.platform_roles,
              (std::vector<std::string>{"A", "B"}));
    const std::string empty_role = error_of("admin:\n  platform_roles: [SRE, \"\"]\n");
    EXPECT_TRUE(contains(empty_role, "admin.platform_roles")) << empty_role;
    for (const char* company_role : {"ADMIN", "HR", "VIEWER"}) {
        const std::string refused = error_of("admin:\n  platform_roles: [SRE, " + std::string(company_role) + "]\n");
        EXPECT_TRUE(contains(refused, "admin.platform_roles")) << refused;
        EXPECT_TRUE(contains(refused, "is a company role")) << refused;
        EXPECT_THROW(parse_config("", "x.yaml", env_of({{"OUTBOX_ADMIN_PLATFORM_ROLES", std::string("SRE,") + company_role}})),
                     ConfigError);
    }
    EXPECT_TRUE(contains(error_of("admin:\n  max_connections: 0\n"), "admin.max_connections"));
    EXPECT_TRUE(contains(error_of("admin:\n  request_timeout: 1h\n"), "admin.request_timeout"));
}

TEST(Config, OneCompanyHoldsAtMostItsShareOfTheAdminDatabaseConnections) {
    const auto defaults = parse_config("", "x.yaml", kNoEnv).admin;
    EXPECT_EQ(defaults.db_connections, 4);
    EXPECT_EQ(defaults.db_connections_per_company, 2);
    const auto set = parse_config("admin:\n  db_connections: 8\n", "x.yaml",
                                  env_of({{"OUTBOX_ADMIN_DB_CONNECTIONS_PER_COMPANY", "3"}}))
                         .admin;
    EXPECT_EQ(set.db_connections, 8);
    EXPECT_EQ(set.db_connections_per_company, 3);
    const std::string over = error_of("admin:\n  db_connections: 2\n  db_connections_per_company: 3\n");
    EXPECT_TRUE(contains(over, "admin.db_connections_per_company = \"3\" (from outboxd.yaml:3)")) << over;
    EXPECT_TRUE(contains(over, "at most admin.db_connections (2, from outboxd.yaml:2)")) << over;
    const std::string over_default = error_of("admin:\n  db_connections: 1\n");
    EXPECT_TRUE(contains(over_default, "admin.db_connections_per_company = \"2\" (from default)")) << over_default;
    EXPECT_TRUE(contains(error_of("admin:\n  db_connections_per_company: 0\n"), "admin.db_connections_per_company"));
}

TEST(Config, AnRs256PublicKeyWithoutAnAudienceIsAnError) {
    const std::string message = error_of("admin:\n  jwt_public_key_file: /etc/outboxd/idp.pem\n");
    EXPECT_TRUE(contains(message, "admin.jwt_audience is required when admin.jwt_public_key_file is set "
                                  "(from outboxd.yaml:2)"))
        << message;
    const std::string from_env = error_of("", env_of({{"OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE", "/etc/outboxd/idp.pem"}}));
    EXPECT_TRUE(contains(from_env, "(from OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE)")) << from_env;

    const Config c = parse_config("admin:\n  jwt_public_key_file: /etc/outboxd/idp.pem\n  jwt_audience: outboxd\n",
                                  "x.yaml", kNoEnv);
    EXPECT_EQ(c.admin.jwt_audience, "outboxd");
}

TEST(Config, SecretsInsideHandlerConfigAreRejectedAtAnyDepth) {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"handlers:\n  h:\n    config:\n      api_key: sk-live-123\n",
         "handlers.h.config.api_key (from outboxd.yaml:4)"},
        {"handlers:\n  h:\n    config:\n      auth:\n        Password: sk-live-123\n",
         "handlers.h.config.auth.Password (from outboxd.yaml:5)"},
        {"handlers:\n  h:\n    config:\n      clients:\n        - name: a\n          Client_SECRET: sk-live-123\n",
         "handlers.h.config.clients[0].Client_SECRET (from outboxd.yaml:6)"},
        {"handlers:\n  h:\n    config: { refresh_token: sk-live-123 }\n", "handlers.h.config.refresh_token"},
        {"handlers:\n  h:\n    config: { token: sk-live-123 }\n", "handlers.h.config.token"},
    };
    for (const auto& [yaml, where] : cases) {
        SCOPED_TRACE(where);
        const std::string message = error_of(yaml);
        EXPECT_TRUE(contains(message, where)) << message;
        EXPECT_TRUE(contains(message, "environment variable")) << message;
        EXPECT_TRUE(contains(message, "_env")) << message;
        EXPECT_FALSE(contains(message, "sk-live-123")) << "the secret must not be printed: " << message;
    }
}

TEST(Config, SecretNamesEndingInEnvAndLookalikesAreAllowed) {
    const Config c = parse_config(
        "handlers:\n  h:\n    config:\n      api_key_env: AI_API_KEY\n      DB_PASSWORD_ENV: PW\n"
        "      max_tokens: 5\n      tokenizer: bpe\n",
        "x.yaml", kNoEnv);
    const auto json = nlohmann::json::parse(c.handler("h").config_json);
    EXPECT_EQ(json["api_key_env"], "AI_API_KEY");
    EXPECT_EQ(json["DB_PASSWORD_ENV"], "PW");
    EXPECT_EQ(json["max_tokens"], 5);
}

TEST(Config, HandlerConfigBecomesJsonWithPlainScalarsTyped) {
    const Config c = parse_config(R"(
handlers:
  h:
    config:
      endpoint: http://127.0.0.1:8081/v1/classify
      retries: 3
      negative: -4
      ratio: 0.5
      exponent: 1e3
      enabled: true
      disabled: false
      quoted_number: "42"
      single_quoted_bool: 'true'
      tagged: !!str 7
      duration: 5s
      nothing: ~
      empty:
      list: [1, two, "3", 4.5]
      nested:
        deeper: { a: 1, b: [x, { c: false }] }
)",
                                  "x.yaml", kNoEnv);
    const auto json = nlohmann::json::parse(c.handler("h").config_json);
    EXPECT_EQ(json["endpoint"], "http://127.0.0.1:8081/v1/classify");
    EXPECT_TRUE(json["retries"].is_number_integer());
    EXPECT_EQ(json["retries"], 3);
    EXPECT_EQ(json["negative"], -4);
    EXPECT_TRUE(json["ratio"].is_number_float());
    EXPECT_EQ(json["ratio"], 0.5);
    EXPECT_EQ(json["exponent"], 1000.0);
    EXPECT_EQ(json["enabled"], true);
    EXPECT_EQ(json["disabled"], false);
    EXPECT_EQ(json["quoted_number"], "42") << "a quoted scalar stays a string";
    EXPECT_EQ(json["single_quoted_bool"], "true") << "a quoted scalar stays a string";
    EXPECT_EQ(json["tagged"], "7") << "an explicit !!str tag stays a string";
    EXPECT_EQ(json["duration"], "5s");
    EXPECT_TRUE(json["nothing"].is_null());
    EXPECT_TRUE(json["empty"].is_null());
    EXPECT_EQ(json["list"], nlohmann::json::parse(R"([1, "two", "3", 4.5])"));
    EXPECT_EQ(json["nested"], nlohmann::json::parse(R"({"deeper": {"a": 1, "b": ["x", {"c": false}]}})"));
}

TEST(Config, HandlerWithoutASectionGetsDefaults) {
    const Config c = parse_config("handlers:\n  other:\n    timeout: 1s\n", "x.yaml", kNoEnv);
    const auto settings = c.handler("unknown-handler");
    EXPECT_FALSE(settings.max_concurrency.has_value());
    EXPECT_FALSE(settings.rate_limit_per_second.has_value());
    EXPECT_EQ(settings.timeout, 60s);
    EXPECT_EQ(settings.config_json, "{}");
}

TEST(Config, AdminListenIsParsedOnceIntoHostAndPort) {
    const auto listen = [](const std::string& text) {
        return parse_config("admin:\n  listen: \"" + text + "\"\n", "x.yaml", kNoEnv).admin.listen_address;
    };
    EXPECT_EQ(parse_config("", "x.yaml", kNoEnv).admin.listen_address->port, 8080) << "the default";
    EXPECT_FALSE(listen("off").has_value());
    const auto v4 = listen("0.0.0.0:9000");
    ASSERT_TRUE(v4);
    EXPECT_EQ(v4->host, "0.0.0.0");
    EXPECT_EQ(v4->port, 9000);
    const auto v6 = listen("[::1]:8080");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->host, "::1") << "brackets are the URL's, not the address'";
    EXPECT_THROW(listen("[]:8080"), ConfigError);
}

TEST(Config, AHandlerWithoutItsOwnTimeoutGetsOutboxHandlerTimeout) {
    const Config c = parse_config("outbox:\n  handler_timeout: 90s\nhandlers:\n  own:\n    timeout: 2s\n  shared:\n    config: {}\n",
                                  "x.yaml", kNoEnv);
    EXPECT_EQ(c.handler("own").timeout, 2s);
    EXPECT_EQ(c.handler("shared").timeout, 90s) << "a section without timeout takes the outbox-wide default";
    EXPECT_EQ(c.handler("no-section").timeout, 90s);
    const Config env = parse_config("", "x.yaml", [](const std::string& name) -> std::optional<std::string> {
        if (name == "OUTBOX_HANDLER_TIMEOUT") return "5s";
        return std::nullopt;
    });
    EXPECT_EQ(env.handler("any").timeout, 5s);
}

TEST(Config, LivenessSettingsHaveTheirDocumentedDefaultsAndVariables) {
    const Config defaults = parse_config("", "x.yaml", kNoEnv);
    EXPECT_EQ(defaults.outbox.handler_timeout, 60s);
    EXPECT_EQ(defaults.outbox.abandon_grace, 10s);
    EXPECT_FALSE(defaults.outbox.max_abandoned_threads.has_value()) << "unset means: as many as outbox.concurrency";
    EXPECT_EQ(defaults.database.startup_timeout, 60s);
    EXPECT_EQ(defaults.database.connect_timeout, 5s);
    EXPECT_EQ(defaults.database.call_timeout, 10s);
    const std::map<std::string, std::string> vars{
        {"OUTBOX_ABANDON_GRACE", "3s"},          {"OUTBOX_MAX_ABANDONED_THREADS", "2"},
        {"OUTBOX_DATABASE_STARTUP_TIMEOUT", "0"}, {"OUTBOX_DATABASE_CONNECT_TIMEOUT", "4s"},
        {"OUTBOX_DATABASE_CALL_TIMEOUT", "7s"},   {"OUTBOX_DATABASE_TCP_USER_TIMEOUT", "8s"},
        {"OUTBOX_DATABASE_KEEPALIVES_IDLE", "9s"}};
    const Config c = parse_config("", "x.yaml", [&](const std::string& name) -> std::optional<std::string> {
        const auto found = vars.find(name);
        return found == vars.end() ? std::nullopt : std::optional<std::string>(found->second);
    });
    EXPECT_EQ(c.outbox.abandon_grace, 3s);
    EXPECT_EQ(c.outbox.max_abandoned_threads, 2);
    EXPECT_EQ(c.database.startup_timeout, 0s);
    EXPECT_EQ(c.database.connect_timeout, 4s);
    EXPECT_EQ(c.database.call_timeout, 7s);
    EXPECT_EQ(c.database.tcp_user_timeout, 8s);
    EXPECT_EQ(c.database.keepalives_idle, 9s);
}

TEST(Config, MissingFileIsAnErrorNamingThePath) {
    try {
        load_config(std::string("/nonexistent/dir/outboxd.yaml"), kNoEnv);
        FAIL() << "expected a ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_TRUE(contains(e.what(), "/nonexistent/dir/outboxd.yaml")) << e.what();
    }
}

TEST(Config, DirectoryInsteadOfAFileIsAnErrorNamingThePath) {
    try {
        load_config(std::string(OUTBOX_SOURCE_DIR "/config"), kNoEnv);
        FAIL() << "expected a ConfigError";
    } catch (const ConfigError& e) {
        EXPECT_TRUE(contains(e.what(), "/config: it is a directory")) << e.what();
    }
}

TEST(Config, ErrorsFromARealFileNameThePathAndLine) {
    const auto path =
        std::filesystem::temp_directory_path() / ("outboxd-config-test-" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(path) << "# comment\noutbox:\n  concurrency: 0\n";
    std::string message;
    try {
        load_config(path.string(), kNoEnv);
    } catch (const ConfigError& e) {
        message = e.what();
    }
    std::filesystem::remove(path);
    EXPECT_TRUE(contains(message, "outbox.concurrency = \"0\" (from " + path.string() + ":3)")) << message;
}

TEST(Config, TheDocumentedExampleFileParsesToTheDefaults) {
    const Config c = load_config(std::string(OUTBOX_SOURCE_DIR "/config/outboxd.yaml"), kNoEnv);
    const Config defaults = load_config(std::nullopt, kNoEnv);
    EXPECT_EQ(c.database.url, defaults.database.url);
    EXPECT_EQ(c.database.pool_size, defaults.database.pool_size);
    EXPECT_EQ(c.outbox.enabled, defaults.outbox.enabled);
    EXPECT_EQ(c.outbox.poll_interval, defaults.outbox.poll_interval);
    EXPECT_EQ(c.outbox.batch_size, defaults.outbox.batch_size);
    EXPECT_EQ(c.outbox.lease_duration, defaults.outbox.lease_duration);
    EXPECT_EQ(c.outbox.max_attempts, defaults.outbox.max_attempts);
    EXPECT_EQ(c.outbox.initial_backoff, defaults.outbox.initial_backoff);
    EXPECT_EQ(c.outbox.max_backoff, defaults.outbox.max_backoff);
    EXPECT_EQ(c.outbox.concurrency, defaults.outbox.concurrency);
    EXPECT_EQ(c.outbox.shutdown_timeout, defaults.outbox.shutdown_timeout);
    EXPECT_EQ(c.outbox.retention, defaults.outbox.retention);
    EXPECT_EQ(c.outbox.host_id, defaults.outbox.host_id);
    EXPECT_EQ(c.outbox.handler_timeout, defaults.outbox.handler_timeout);
    EXPECT_EQ(c.outbox.abandon_grace, defaults.outbox.abandon_grace);
    EXPECT_EQ(c.outbox.max_abandoned_threads, defaults.outbox.max_abandoned_threads);
    EXPECT_EQ(c.database.connect_timeout, defaults.database.connect_timeout);
    EXPECT_EQ(c.database.keepalives_idle, defaults.database.keepalives_idle);
    EXPECT_EQ(c.database.tcp_user_timeout, defaults.database.tcp_user_timeout);
    EXPECT_EQ(c.database.call_timeout, defaults.database.call_timeout);
    EXPECT_EQ(c.database.startup_timeout, defaults.database.startup_timeout);
    EXPECT_EQ(c.plugins.dir, defaults.plugins.dir);
    EXPECT_EQ(c.admin.listen, defaults.admin.listen);
    EXPECT_EQ(c.admin.jwt_public_key_file, defaults.admin.jwt_public_key_file);
    EXPECT_EQ(c.admin.jwt_issuer, defaults.admin.jwt_issuer);
    EXPECT_EQ(c.admin.jwt_audience, defaults.admin.jwt_audience);
    EXPECT_EQ(c.admin.jwt_max_lifetime, defaults.admin.jwt_max_lifetime);
    EXPECT_EQ(c.log.level, defaults.log.level);
    EXPECT_EQ(c.log.format, defaults.log.format);

    const auto classification = c.handler("category-classification");
    EXPECT_EQ(classification.max_concurrency, 1);
    EXPECT_EQ(classification.rate_limit_per_second, 2.0);
    EXPECT_EQ(classification.timeout, 10s);
    EXPECT_EQ(
        nlohmann::json::parse(classification.config_json),
        nlohmann::json::parse(R"({"endpoint": "http://127.0.0.1:8081/v1/classify", "api_key_env": "AI_API_KEY"})"));
    const auto forwarding = c.handler("mission-log-forwarding");
    EXPECT_FALSE(forwarding.max_concurrency.has_value());
    EXPECT_EQ(forwarding.timeout, 60s);
    EXPECT_EQ(nlohmann::json::parse(forwarding.config_json),
              nlohmann::json::parse(R"({"base_url": "http://127.0.0.1:8082", "timeout": "5s"})"));
}

TEST(Config, RemovingTheSecretFromTheEnvironmentLeavesNoTraceOfIt) {
    ::setenv("OUTBOX_ADMIN_JWT_SECRET", "unit-test-secret-0123456789abcdef", 1);
    char* const value = std::getenv("OUTBOX_ADMIN_JWT_SECRET");
    ASSERT_NE(value, nullptr);
    outbox::config::remove_secret_from_environment();
    EXPECT_EQ(std::getenv("OUTBOX_ADMIN_JWT_SECRET"), nullptr);
    EXPECT_EQ(outbox::config::process_environment()("OUTBOX_ADMIN_JWT_SECRET"), std::nullopt);
    outbox::config::remove_secret_from_environment();  // unset already: nothing to do
}

TEST(Config, ProcessEnvironmentReadsTheRealEnvironment) {
    const std::string name = "OUTBOX_UNIT_TEST_PROCESS_ENVIRONMENT_PROBE";
    const auto env = outbox::config::process_environment();
    ::unsetenv(name.c_str());
    EXPECT_FALSE(env(name).has_value());
    ::setenv(name.c_str(), "present", 1);
    EXPECT_EQ(env(name), "present");
    ::unsetenv(name.c_str());
}

// The reference is generated from the settings table; these keep what it says true.
TEST(ConfigReference, EveryDocumentedDefaultIsTheBuiltInDefault) {
    const Config defaults = parse_config("", "outboxd.yaml", kNoEnv);
    int checked = 0;
    for (const auto& row : outbox::config::settings_reference()) {
        // Derived defaults are written in parentheses; file-only keys have no variable to set.
        if (row.env.empty() || row.default_value.empty() || row.default_value.front() == '(') continue;
        Config documented;
        try {
            documented = parse_config("", "outboxd.yaml", env_of({{row.env, row.default_value}}));
        } catch (const ConfigError& e) {
            ADD_FAILURE() << row.key << ": the documented default is refused: " << e.what();
            continue;
        }
        EXPECT_TRUE(documented == defaults) << row.key << ": the documented default " << row.default_value
                                            << " is not the value used when the key is not set";
        ++checked;
    }
    EXPECT_GE(checked, 20);
}

TEST(ConfigReference, EveryKeyHasItsVariableTypeDefaultAndMeaning) {
    const auto rows = outbox::config::settings_reference();
    const std::string markdown = outbox::config::config_reference_markdown();
    for (const auto& row : rows) {
        const std::string name = row.key.empty() ? row.env : row.key;
        EXPECT_FALSE(row.type.empty()) << name;
        EXPECT_FALSE(row.default_value.empty()) << name << ": no documented default";
        EXPECT_FALSE(row.description.empty()) << name << ": no meaning documented";
        // Handler and per-company keys are read from the file only.
        if (row.key.rfind("handlers.", 0) != 0 && row.key.rfind("tenants.companies.", 0) != 0 && !row.key.empty()) {
            EXPECT_EQ(row.env.rfind("OUTBOX_", 0), 0u) << name << ": no OUTBOX_* variable";
        }
        EXPECT_NE(markdown.find("| " + (row.key.empty() ? std::string("—") : "`" + row.key + "`") + " |"),
                  std::string::npos)
            << name << " is missing from the Markdown reference";
    }
    // What a key accepts is the parser's own range, not a second copy of it.
    const auto batch =
        std::find_if(rows.begin(), rows.end(), [](const auto& row) { return row.key == "outbox.batch_size"; });
    ASSERT_NE(batch, rows.end());
    EXPECT_EQ(batch->type, "integer, 1 to 1000");
    EXPECT_EQ(batch->env, "OUTBOX_BATCH_SIZE");
    EXPECT_EQ(batch->default_value, "20");
}

}  // namespace

TEST(Config, RequireRegisteredTypesIsABooleanFromTheFileOrItsVariable) {
    EXPECT_FALSE(load_config(std::nullopt, kNoEnv).outbox.require_registered_types);
    EXPECT_TRUE(parse_config("outbox:\n  require_registered_types: true\n", "outboxd.yaml", kNoEnv)
                    .outbox.require_registered_types);
    EXPECT_TRUE(parse_config("", "outboxd.yaml", env_of({{"OUTBOX_REQUIRE_REGISTERED_TYPES", "true"}}))
                    .outbox.require_registered_types);
    EXPECT_TRUE(contains(error_of("outbox:\n  require_registered_types: maybe\n"), "outbox.require_registered_types"));
}

namespace {

using outbox::config::CircuitBreakerSettings;

TEST(ConfigCircuitBreaker, IsOffUnlessItsMappingIsWritten) {
    const Config c = parse_config("handlers:\n  h:\n    timeout: 5s\n", "outboxd.yaml", kNoEnv);
    EXPECT_FALSE(c.handler("h").circuit_breaker.has_value());
    EXPECT_FALSE(c.handler("not-configured").circuit_breaker.has_value());
}

TEST(ConfigCircuitBreaker, AnEmptyMappingTurnsItOnWithTheDocumentedDefaults) {
    const Config c = parse_config("handlers:\n  h:\n    circuit_breaker: {}\n", "outboxd.yaml", kNoEnv);
    ASSERT_TRUE(c.handler("h").circuit_breaker.has_value());
    const CircuitBreakerSettings breaker = *c.handler("h").circuit_breaker;
    EXPECT_EQ(breaker.failure_ratio, 0.5);
    EXPECT_EQ(breaker.min_calls, 20);
    EXPECT_EQ(breaker.window, 30s);
    EXPECT_EQ(breaker.cool_down, 30s);
}

TEST(ConfigCircuitBreaker, EveryKeyIsRead) {
    const Config c = parse_config(R"(
handlers:
  mission-log-forwarding:
    circuit_breaker:
      failure_ratio: 0.25
      min_calls: 5
      window: 1500ms
      cool_down: 2m
  other:
    circuit_breaker: {failure_ratio: 1, min_calls: 1}
)",
                                  "outboxd.yaml", kNoEnv);
    const auto breaker = c.handler("mission-log-forwarding").circuit_breaker;
    ASSERT_TRUE(breaker.has_value());
    EXPECT_EQ(*breaker, (CircuitBreakerSettings{0.25, 5, 1500ms, 2min}));
    const auto other = c.handler("other").circuit_breaker;
    ASSERT_TRUE(other.has_value());
    EXPECT_EQ(*other, (CircuitBreakerSettings{1.0, 1, 30s, 30s})) << "unwritten keys keep their defaults";
}

TEST(ConfigCircuitBreaker, BadValuesAreOneLineErrorsNamingTheKeyValueLineAndWhatIsAllowed) {
    struct Case {
        std::string body;  // the circuit_breaker line(s), indented under handlers.h
        std::string key_value_source;
        std::string allowed;
    };
    const std::vector<Case> cases{
        {"circuit_breaker: {failure_ratio: 0}", R"(handlers.h.circuit_breaker.failure_ratio = "0" (from outboxd.yaml:3))",
         "greater than 0 and at most 1"},
        {"circuit_breaker: {failure_ratio: 1.5}", R"(handlers.h.circuit_breaker.failure_ratio = "1.5")", "at most 1"},
        {"circuit_breaker: {failure_ratio: -0.1}", R"(handlers.h.circuit_breaker.failure_ratio = "-0.1")",
         "greater than 0"},
        {"circuit_breaker: {failure_ratio: half}", R"(handlers.h.circuit_breaker.failure_ratio = "half")",
         "greater than 0"},
        {"circuit_breaker: {failure_ratio: .nan}", R"(handlers.h.circuit_breaker.failure_ratio = ".nan")",
         "greater than 0"},
        {"circuit_breaker: {min_calls: 0}", R"(handlers.h.circuit_breaker.min_calls = "0")", "from 1 to 1000000"},
        {"circuit_breaker: {min_calls: 2.5}", R"(handlers.h.circuit_breaker.min_calls = "2.5")", "from 1 to 1000000"},
        {"circuit_breaker: {window: 0s}", R"(handlers.h.circuit_breaker.window = "0s")", "from 1ms to 1d"},
        {"circuit_breaker: {window: -5s}", R"(handlers.h.circuit_breaker.window = "-5s")", "1ms"},
        {"circuit_breaker: {cool_down: 0ms}", R"(handlers.h.circuit_breaker.cool_down = "0ms")", "from 1ms to 1d"},
        {"circuit_breaker: {cool_down: soon}", R"(handlers.h.circuit_breaker.cool_down = "soon")", "such as 250ms"},
        {"circuit_breaker: {cool_down: 2d}", R"(handlers.h.circuit_breaker.cool_down = "2d")", "from 1ms to 1d"},
        {"circuit_breaker: {failure_rate: 0.5}", "handlers.h.circuit_breaker.failure_rate (from outboxd.yaml:3)",
         "did you mean failure_ratio?"},
        {"circuit_breaker: {window: [1s]}", "handlers.h.circuit_breaker.window", "expected a single value"},
        {"circuit_breaker:", "handlers.h.circuit_breaker (from outboxd.yaml:3)", "write {} for the defaults"},
        {"circuit_breaker: true", "handlers.h.circuit_breaker", "expected a mapping of failure_ratio"},
        {"circuit_breaker.window: 1s", "handlers.h.circuit_breaker.window", "unknown key"},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.body);
        const std::string message = error_of("handlers:\n  h:\n    " + c.body + "\n");
        EXPECT_TRUE(contains(message, c.key_value_source)) << message;
        EXPECT_TRUE(contains(message, c.allowed)) << message;
    }
}

TEST(ConfigCircuitBreaker, ABadValueIsAConfigError) {
    // main maps ConfigError to exit code 2 (HandlerCircuitBreaker.* runs the binary).
    EXPECT_THROW(parse_config("handlers:\n  h:\n    circuit_breaker: {min_calls: 0}\n", "outboxd.yaml", kNoEnv),
                 ConfigError);
}

TEST(ConfigCircuitBreaker, TheReferenceListsTheMappingAndEachKeyWithItsDefaultAndRange) {
    const auto rows = outbox::config::settings_reference();
    const auto find = [&](const std::string& key) {
        return std::find_if(rows.begin(), rows.end(), [&](const auto& row) { return row.key == key; });
    };
    const std::map<std::string, std::pair<std::string, std::string>> expected{
        {"handlers.<name>.circuit_breaker.failure_ratio", {"number, greater than 0 and at most 1", "0.5"}},
        {"handlers.<name>.circuit_breaker.min_calls", {"integer, 1 to 1000000", "20"}},
        {"handlers.<name>.circuit_breaker.window", {"duration, 1ms to 1d", "30s"}},
        {"handlers.<name>.circuit_breaker.cool_down", {"duration, 1ms to 1d", "30s"}},
    };
    for (const auto& [key, type_and_default] : expected) {
        const auto row = find(key);
        ASSERT_NE(row, rows.end()) << key;
        EXPECT_EQ(row->type, type_and_default.first) << key;
        EXPECT_EQ(row->default_value, type_and_default.second) << key;
        EXPECT_TRUE(row->env.empty()) << key << ": handler keys are file-only";
        // The documented default is the one an empty mapping gives.
        const Config c = parse_config(
            "handlers:\n  h:\n    circuit_breaker: {" + key.substr(std::string("handlers.<name>.circuit_breaker.").size()) +
                ": " + row->default_value + "}\n",
            "outboxd.yaml", kNoEnv);
        EXPECT_EQ(*c.handler("h").circuit_breaker, CircuitBreakerSettings{}) << key;
    }
    const auto mapping = find("handlers.<name>.circuit_breaker");
    ASSERT_NE(mapping, rows.end());
    EXPECT_EQ(mapping->default_value, "(off)");
}

}  // namespace

// handlers.<name>.commit_group is a mapping of its own keys; present, it needs max_events.
TEST(Config, CommitGroupIsOffByDefaultAndReadFromItsMapping) {
    const auto off = parse_config("handlers:\n  h:\n    timeout: 5s\n", "outboxd.yaml", kNoEnv);
    EXPECT_EQ(off.handler("h").commit_group.max_events, 0) << "off unless asked for";
    const auto on = parse_config("handlers:\n  h:\n    commit_group: {max_events: 32, max_wait: 5ms}\n", "outboxd.yaml",
                                 kNoEnv);
    EXPECT_EQ(on.handler("h").commit_group.max_events, 32);
    EXPECT_EQ(on.handler("h").commit_group.max_wait, std::chrono::milliseconds{5});
    const auto defaults = parse_config("handlers:\n  h:\n    commit_group:\n      max_events: 64\n", "outboxd.yaml", kNoEnv);
    EXPECT_EQ(defaults.handler("h").commit_group.max_events, 64);
    EXPECT_EQ(defaults.handler("h").commit_group.max_wait, std::chrono::milliseconds{20});
}

TEST(Config, BadCommitGroupsAreRefusedInOneLineNamingTheKey) {
    const std::string one = error_of("handlers:\n  h:\n    commit_group: {max_events: 1}\n");
    EXPECT_TRUE(contains(one, R"(handlers.h.commit_group.max_events = "1")")) << one;
    EXPECT_TRUE(contains(one, "from 2 to 64")) << one;
    const std::string many = error_of("handlers:\n  h:\n    commit_group: {max_events: 65}\n");
    EXPECT_TRUE(contains(many, R"(handlers.h.commit_group.max_events = "65")")) << many;
    const std::string wait = error_of("handlers:\n  h:\n    commit_group: {max_events: 8, max_wait: 11s}\n");
    EXPECT_TRUE(contains(wait, R"(handlers.h.commit_group.max_wait = "11s")")) << wait;
    const std::string without = error_of("handlers:\n  h:\n    commit_group: {max_wait: 5ms}\n");
    EXPECT_TRUE(contains(without, "handlers.h.commit_group (from outboxd.yaml:3): set max_events")) << without;
    const std::string unknown = error_of("handlers:\n  h:\n    commit_group: {max_event: 8}\n");
    EXPECT_TRUE(contains(unknown, "handlers.h.commit_group.max_event (from outboxd.yaml:3): unknown key")) << unknown;
    EXPECT_TRUE(contains(unknown, "did you mean max_events?")) << unknown;
    const std::string scalar = error_of("handlers:\n  h:\n    commit_group: 32\n");
    EXPECT_TRUE(contains(scalar, "handlers.h.commit_group (from outboxd.yaml:3): expected a mapping")) << scalar;
    const std::string typo = error_of("handlers:\n  h:\n    commit_grup: {max_events: 8}\n");
    EXPECT_TRUE(contains(typo, "did you mean commit_group?")) << typo;
}

// tenants: a default cap (file or variable) and, per company, a cap and a weight.
TEST(Config, TenantsAreReadFromTheFileAndTheDefaultCapFromItsVariable) {
    const auto none = parse_config("", "outboxd.yaml", kNoEnv);
    EXPECT_FALSE(none.tenants.default_max_concurrency) << "unlimited unless asked for";
    EXPECT_TRUE(none.tenants.companies.empty());
    const auto c = parse_config(
        "tenants:\n  default_max_concurrency: 16\n  companies:\n    acme: {max_concurrency: 4, weight: 3}\n"
        "    \"tenant 7\":\n      weight: 2\n    listed-only:\n",
        "outboxd.yaml", kNoEnv);
    EXPECT_EQ(c.tenants.default_max_concurrency, 16);
    EXPECT_EQ(c.tenants.companies.at("acme").max_concurrency, 4);
    EXPECT_EQ(c.tenants.companies.at("acme").weight, 3);
    EXPECT_FALSE(c.tenants.companies.at("tenant 7").max_concurrency);
    EXPECT_EQ(c.tenants.companies.at("tenant 7").weight, 2);
    EXPECT_EQ(c.tenants.companies.at("listed-only"), outbox::config::TenantSettings{});
    const auto env = parse_config("tenants:\n  default_max_concurrency: 16\n", "outboxd.yaml",
                                  env_of({{"OUTBOX_TENANTS_DEFAULT_MAX_CONCURRENCY", "5"}}));
    EXPECT_EQ(env.tenants.default_max_concurrency, 5);
}

TEST(Config, BadTenantSettingsAreRefusedInOneLineNamingTheKey) {
    const std::string zero = error_of("tenants:\n  companies:\n    acme: {weight: 0}\n");
    EXPECT_TRUE(contains(zero, R"(tenants.companies.acme.weight = "0")")) << zero;
    EXPECT_TRUE(contains(zero, "from 1 to 1000")) << zero;
    const std::string cap = error_of("tenants:\n  companies:\n    acme: {max_concurrency: -1}\n");
    EXPECT_TRUE(contains(cap, R"(tenants.companies.acme.max_concurrency = "-1")")) << cap;
    const std::string unknown = error_of("tenants:\n  companies:\n    acme: {wieght: 2}\n");
    EXPECT_TRUE(contains(unknown, "tenants.companies.acme.wieght (from outboxd.yaml:3): unknown key")) << unknown;
    EXPECT_TRUE(contains(unknown, "did you mean weight?")) << unknown;
    const std::string section = error_of("tenants:\n  compnies: {}\n");
    EXPECT_TRUE(contains(section, "did you mean companies?")) << section;
    const std::string long_id = error_of("tenants:\n  companies:\n    " + std::string(101, 'x') + ": {weight: 2}\n");
    EXPECT_TRUE(contains(long_id, "a company id is 1 to 100 printable characters")) << long_id;
    const std::string scalar = error_of("tenants:\n  companies:\n    acme: 3\n");
    EXPECT_TRUE(contains(scalar, "tenants.companies.acme (from outboxd.yaml:3): expected a mapping")) << scalar;
    const std::string variable = error_of("", env_of({{"OUTBOX_TENANTS_DEFAULT_MAX_CONCURRENCY", "0"}}));
    EXPECT_TRUE(contains(variable, "OUTBOX_TENANTS_DEFAULT_MAX_CONCURRENCY")) << variable;
}
