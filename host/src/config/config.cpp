#include "config/config.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "core/duration.hpp"

namespace outbox::config {
namespace {

using namespace std::chrono_literals;
using core::format_duration;
using core::parse_duration;

// A value as written, with where it was written ("outboxd.yaml:12" or "OUTBOX_BATCH_SIZE"),
// so every error can point at the exact line or variable to fix.
struct Raw {
    std::string text;
    std::string origin;
};

std::string shown_value(std::string_view text) {
    constexpr std::size_t kMaxShown = 120;  // a pasted PEM or URL must not flood the one-line error
    std::string shown(text.substr(0, kMaxShown));
    if (text.size() > kMaxShown) shown += "...";
    // JSON escaping keeps the message on one line whatever the value contains.
    return nlohmann::json(shown).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

[[noreturn]] void fail(std::string_view key, const Raw& raw, std::string_view allowed) {
    throw ConfigError(std::string(key) + " = " + shown_value(raw.text) + " (from " + raw.origin +
                      "): " + std::string(allowed));
}

std::string one_line(std::string text) {
    for (char& c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return text;
}

[[noreturn]] void fail_at(std::string_view key, std::string_view origin, std::string_view problem) {
    throw ConfigError(std::string(key) + " (from " + std::string(origin) + "): " + std::string(problem));
}

std::string lower(std::string_view text) {
    std::string out(text);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

bool ends_with(std::string_view text, std::string_view suffix) {
    return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc{} || ptr != end) return std::nullopt;
    return value;
}

// --- conversions ------------------------------------------------------------------------

// One value on its way into Config: the key it sets and where it came from.
struct Value {
    std::string_view key;
    const Raw& raw;
    bool from_env = false;
};

[[noreturn]] void fail(const Value& v, std::string_view allowed) { fail(v.key, v.raw, allowed); }

milliseconds to_duration(const Value& v, milliseconds lo, milliseconds hi) {
    const std::string range = "from " + format_duration(lo) + " to " + format_duration(hi);
    const auto value = parse_duration(v.raw.text);
    if (!value) fail(v, "expected a duration such as 250ms, 1s, 5m (units ms, s, m, h, d), " + range);
    if (*value < lo || *value > hi) fail(v, "expected a duration " + range);
    return *value;
}

int to_int(const Value& v, int lo, int hi) {
    const auto value = parse_number<long long>(v.raw.text);
    if (!value || *value < lo || *value > hi) {
        fail(v, "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    return static_cast<int>(*value);
}

bool to_bool(const Value& v) {
    const std::string text = lower(v.raw.text);
    if (text == "true" || (v.from_env && (text == "1" || text == "yes"))) return true;
    if (text == "false" || (v.from_env && (text == "0" || text == "no"))) return false;
    fail(v, v.from_env ? "expected true or false (or 1/0, yes/no)" : "expected true or false");
}

std::vector<std::string> to_roles(const Value& v) {
    std::vector<std::string> roles;
    std::string_view text = v.raw.text;
    while (true) {
        const auto comma = text.find(',');
        std::string_view role = text.substr(0, comma);
        while (!role.empty() && role.front() == ' ') role.remove_prefix(1);
        while (!role.empty() && role.back() == ' ') role.remove_suffix(1);
        const bool valid = !role.empty() && role.size() <= 64 && std::all_of(role.begin(), role.end(), [](char c) {
            return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
        });
        if (!valid) fail(v, "expected a list of role names (letters, digits, _ and -), e.g. [PLATFORM_ADMIN]");
        // Every tenant's tokens carry these: listing one would give each company's admins
        // fleet-wide pause and resume.
        if (role == "ADMIN" || role == "HR" || role == "VIEWER") {
            fail(v, "'" + std::string(role) +
                        "' is a company role (ADMIN, HR, VIEWER); a platform role must be one no tenant's token "
                        "carries, e.g. PLATFORM_ADMIN");
        }
        roles.emplace_back(role);
        if (comma == std::string_view::npos) break;
        text.remove_prefix(comma + 1);
    }
    return roles;
}

// An HTTP header name (RFC 9110 token characters), or empty for none.
std::string to_header_name(const Value& v) {
    const std::string& text = v.raw.text;
    const bool valid = text.size() <= 100 && std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
    });
    if (!valid) fail(v, "expected an HTTP header name of at most 100 letters, digits, - and _ (or empty for none)");
    return text;
}

std::string to_choice(const Value& v, std::initializer_list<std::string_view> choices) {
    std::string allowed;
    for (const auto choice : choices) {
        if (v.raw.text == choice) return v.raw.text;
        allowed += (allowed.empty() ? "" : ", ") + std::string(choice);
    }
    fail(v, "expected one of " + allowed);
}

// The one parser of admin.listen: "off", "host:port" or "[v6]:port".
std::optional<ListenAddress> to_listen(const Value& v) {
    const std::string& text = v.raw.text;
    if (text == "off") return std::nullopt;
    const auto colon = text.rfind(':');
    const auto port =
        colon == std::string::npos ? std::nullopt : parse_number<int>(std::string_view(text).substr(colon + 1));
    std::string host = colon == std::string::npos ? std::string() : text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || !port || *port < 1 || *port > 65535) {
        fail(v, "expected off or host:port with a port from 1 to 65535, e.g. 127.0.0.1:8080");
    }
    return ListenAddress{std::move(host), *port};
}

double to_rate(const Value& v) {
    const auto value = parse_number<double>(v.raw.text);
    if (!value || !std::isfinite(*value) || *value <= 0.0 || *value > 100000.0) {
        fail(v, "expected a number greater than 0 and at most 100000");
    }
    return *value;
}

// An OTLP/HTTP endpoint: plain http (a collector or agent next to the host; TLS is the
// collector's job), a host, a port and a path. Empty: off.
std::string to_otlp_endpoint(const Value& v) {
    const std::string& text = v.raw.text;
    if (text.empty()) return text;
    // Read by hand, not with std::regex: its recursion grows with the input's length.
    const auto bad = [&] {
        fail(v, "expected an http://host:port/path URL (e.g. http://127.0.0.1:4318/v1/traces); https is not "
                "supported: send to a collector on the host or its network");
    };
    constexpr std::string_view kScheme = "http://";
    if (text.size() > 2048 || text.compare(0, kScheme.size(), kScheme) != 0) bad();
    const std::string_view rest = std::string_view(text).substr(kScheme.size());
    const auto slash = rest.find('/');
    if (slash == std::string_view::npos) bad();
    const std::string_view authority = rest.substr(0, slash);
    const std::string_view path = rest.substr(slash);
    const auto colon = authority.rfind(':');
    if (colon == std::string_view::npos || colon == 0) bad();
    const std::string_view host = authority.substr(0, colon);
    const std::string_view port = authority.substr(colon + 1);
    const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
    const bool host_ok =
        bracketed ? std::all_of(host.begin() + 1, host.end() - 1,
                                [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':'; })
                  : std::all_of(host.begin(), host.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
                    });
    int port_number = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), port_number);
    const bool path_ok = std::all_of(path.begin(), path.end(), [](char c) { return c >= '!' && c <= '~'; });
    if (!host_ok || port.empty() || port.size() > 5 || error != std::errc() || end != port.data() + port.size() ||
        port_number < 1 || port_number > 65535 || !path_ok) {
        bad();
    }
    return text;
}

std::string to_service_name(const Value& v) {
    const std::string& text = v.raw.text;
    if (text.empty() || text.size() > 100 ||
        !std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c <= 0x7e; })) {
        fail(v, "expected 1 to 100 printable ASCII characters");
    }
    return text;
}

// --- the table of scalar settings ---------------------------------------------------------

// Every scalar key is declared here once: its variable, its parser (with its range) and
// what the reference documents. `outboxd config reference` prints this table, so adding a
// row is all a new key needs. What a key accepts is not written twice: the reference shows
// the parser's own "expected ..." text (see allowed_text()), unless `type` says it.
struct Setting {
    std::string_view key;  // "outbox.poll_interval"
    std::string_view env;  // its OUTBOX_* override
    void (*apply)(Config&, const Value&);
    std::string_view default_value = {};  // as written in the file; "(...)": derived at run time
    std::string_view description = {};   // Markdown, one line
    std::string_view type = {};           // only for values the parser takes as free text
};

const std::array kSettings{
    Setting{"database.url", "OUTBOX_DATABASE_URL", [](Config& c, const Value& v) { c.database.url = v.raw.text; },
            "(libpq defaults: `PGHOST`, ...)", "the database to use", "a libpq connection string or URL"},
    Setting{"database.pool_size", "OUTBOX_DB_POOL_SIZE",
            [](Config& c, const Value& v) { c.database.pool_size = to_int(v, 1, 256); }, "4",
            "connections for handlers' `ctx.db()` work, independent of `outbox.concurrency`"},
    Setting{"database.connect_timeout", "OUTBOX_DATABASE_CONNECT_TIMEOUT",
            [](Config& c, const Value& v) { c.database.connect_timeout = to_duration(v, 1s, 10min); }, "5s",
            "one connection attempt (libpq `connect_timeout`)"},
    Setting{"database.keepalives_idle", "OUTBOX_DATABASE_KEEPALIVES_IDLE",
            [](Config& c, const Value& v) { c.database.keepalives_idle = to_duration(v, 1s, 1h); }, "10s",
            "TCP keepalives start after this idle time (then every 5 s, 3 probes)"},
    Setting{"database.tcp_user_timeout", "OUTBOX_DATABASE_TCP_USER_TIMEOUT",
            [](Config& c, const Value& v) { c.database.tcp_user_timeout = to_duration(v, 1s, 1h); }, "20s",
            "data unacknowledged this long drops the connection"},
    Setting{"database.call_timeout", "OUTBOX_DATABASE_CALL_TIMEOUT",
            [](Config& c, const Value& v) { c.database.call_timeout = to_duration(v, 1s, 1h); }, "10s",
            "the host shuts a connection down when one database call takes longer (bookkeeping sessions also "
            "set `statement_timeout` to ¾ of it)"},
    Setting{"database.startup_timeout", "OUTBOX_DATABASE_STARTUP_TIMEOUT",
            [](Config& c, const Value& v) { c.database.startup_timeout = to_duration(v, 0ms, 24h); }, "60s",
            "how long `run` and `migrate` wait for an unreachable database (`0`: fail at once)"},
    Setting{"database.session_url", "OUTBOX_DATABASE_SESSION_URL",
            [](Config& c, const Value& v) { c.database.session_url = v.raw.text; }, "(none)",
            "a direct connection (not through a transaction-mode pooler) for `LISTEN` and `migrate`; "
            "without it, hosts behind such a pooler poll",
            "a libpq connection string or URL"},
    Setting{"database.pool_mode", "OUTBOX_DATABASE_POOL_MODE",
            [](Config& c, const Value& v) { c.database.pool_mode = to_choice(v, {"session", "transaction"}); }, "session",
            "`transaction`: `database.url` is a pooler in transaction mode (PgBouncer `pool_mode = transaction`); "
            "no connection on it keeps session state (no prepared statements, `SET`, session locks, `LISTEN`)"},
    Setting{"database.require_least_privilege", "OUTBOX_DATABASE_REQUIRE_LEAST_PRIVILEGE",
            [](Config& c, const Value& v) { c.database.require_least_privilege = to_bool(v); }, "false",
            "`true`: `outboxd run` refuses to start (exit 2) when `database.url`'s role is a superuser, owns the "
            "outbox tables or is a member of their owner; `false`: it starts with one warning line"},
    Setting{"outbox.enabled", "OUTBOX_ENABLED", [](Config& c, const Value& v) { c.outbox.enabled = to_bool(v); },
            "true", "false: this host claims nothing; publishing is unaffected"},
    Setting{"outbox.poll_interval", "OUTBOX_POLL_INTERVAL",
            [](Config& c, const Value& v) { c.outbox.poll_interval = to_duration(v, 10ms, 1h); }, "1s",
            "how often a host looks for due events without a `NOTIFY`"},
    Setting{"outbox.batch_size", "OUTBOX_BATCH_SIZE",
            [](Config& c, const Value& v) { c.outbox.batch_size = to_int(v, 1, 1000); }, "20",
            "the most events one claim takes"},
    Setting{"outbox.lease_duration", "OUTBOX_LEASE_DURATION",
            [](Config& c, const Value& v) { c.outbox.lease_duration = to_duration(v, 1s, 24h); }, "5m",
            "how long a claim holds an event before another host may recover it; the heartbeat extends it "
            "every third of it"},
    Setting{"outbox.max_attempts", "OUTBOX_MAX_ATTEMPTS",
            [](Config& c, const Value& v) { c.outbox.max_attempts = to_int(v, 1, 1000); }, "8",
            "attempts before an event that keeps failing goes to `REVIEW_REQUIRED`"},
    Setting{"outbox.initial_backoff", "OUTBOX_INITIAL_BACKOFF",
            [](Config& c, const Value& v) { c.outbox.initial_backoff = to_duration(v, 0ms, 24h); }, "1s",
            "the delay after the first failed attempt; it doubles per attempt, with jitter"},
    // The lower bound (initial_backoff) is checked once both are known.
    Setting{"outbox.max_backoff", "OUTBOX_MAX_BACKOFF",
            [](Config& c, const Value& v) { c.outbox.max_backoff = to_duration(v, 0ms, 24h * 7); }, "5m",
            "the longest delay between attempts; at least `outbox.initial_backoff`"},
    Setting{"outbox.concurrency", "OUTBOX_CONCURRENCY",
            [](Config& c, const Value& v) { c.outbox.concurrency = to_int(v, 1, 1024); }, "8",
            "handler calls in flight per host"},
    Setting{"outbox.shutdown_timeout", "OUTBOX_SHUTDOWN_TIMEOUT",
            [](Config& c, const Value& v) { c.outbox.shutdown_timeout = to_duration(v, 0ms, 1h); }, "30s",
            "how long a stop waits for running handlers before cancelling them"},
    Setting{"outbox.handler_timeout", "OUTBOX_HANDLER_TIMEOUT",
            [](Config& c, const Value& v) { c.outbox.handler_timeout = to_duration(v, 1ms, 24h); }, "60s",
            "the deadline of a handler call without its own `handlers.<name>.timeout`; may exceed "
            "`lease_duration` (the heartbeat extends the lease meanwhile)"},
    Setting{"outbox.abandon_grace", "OUTBOX_ABANDON_GRACE",
            [](Config& c, const Value& v) { c.outbox.abandon_grace = to_duration(v, 0ms, 1h); }, "10s",
            "a call still running this long after its deadline is abandoned (`HANDLER_TIMEOUT`)"},
    Setting{"outbox.max_abandoned_threads", "OUTBOX_MAX_ABANDONED_THREADS",
            [](Config& c, const Value& v) { c.outbox.max_abandoned_threads = to_int(v, 0, 1024); },
            "(= `outbox.concurrency`)",
            "stuck handler threads replaced before the host stops claiming and exits with code 3"},
    Setting{"outbox.retention", "OUTBOX_RETENTION",
            [](Config& c, const Value& v) { c.outbox.retention = to_duration(v, 1min, 24h * 3650); }, "7d",
            "`COMPLETED` events older than this are deleted"},
    Setting{"outbox.require_registered_types", "OUTBOX_REQUIRE_REGISTERED_TYPES",
            [](Config& c, const Value& v) { c.outbox.require_registered_types = to_bool(v); }, "false",
            "`true`: `outboxd migrate` and `outboxd event-types apply` switch on the database-wide check that makes "
            "`outbox_publish()` refuse event types not in the registry; `false` leaves the stored value as it is "
            "(only `--require-registered-types=false` switches it off)"},
    Setting{"outbox.host_id", "OUTBOX_HOST_ID", [](Config& c, const Value& v) { c.outbox.host_id = v.raw.text; },
            "(`<hostname>:<pid>`)",
            "this host's name, shown as `lease_owner`; one live process per id (a second one refuses to start, exit 2)",
            "text"},
    Setting{"plugins.dir", "OUTBOX_PLUGIN_DIR", [](Config& c, const Value& v) { c.plugins.dir = v.raw.text; },
            "/usr/lib/outboxd/plugins", "the watched plugin directory", "a directory"},
    Setting{"admin.listen", "OUTBOX_ADMIN_LISTEN",
            [](Config& c, const Value& v) {
                c.admin.listen_address = to_listen(v);
                c.admin.listen = v.raw.text;
            },
            "127.0.0.1:8080", "where the admin API, `/metrics`, `/healthz` and `/readyz` are served"},
    Setting{"admin.jwt_public_key_file", "OUTBOX_ADMIN_JWT_PUBLIC_KEY_FILE",
            [](Config& c, const Value& v) { c.admin.jwt_public_key_file = v.raw.text; }, "(none)",
            "RS256: a PEM public key for admin tokens; an unreadable file is a configuration error", "a file"},
    Setting{"admin.jwt_issuer", "OUTBOX_ADMIN_JWT_ISSUER",
            [](Config& c, const Value& v) { c.admin.jwt_issuer = v.raw.text; }, "(none)",
            "when set, a token's `iss` must equal it", "text"},
    Setting{"admin.jwt_audience", "OUTBOX_ADMIN_JWT_AUDIENCE",
            [](Config& c, const Value& v) { c.admin.jwt_audience = v.raw.text; }, "(none)",
            "when set, a token's `aud` must contain it; required with `admin.jwt_public_key_file`", "text"},
    Setting{"admin.jwt_max_lifetime", "OUTBOX_ADMIN_JWT_MAX_LIFETIME",
            [](Config& c, const Value& v) { c.admin.jwt_max_lifetime = to_duration(v, 1s, 24h); }, "1h",
            "admin tokens whose `exp - iat` is longer are refused"},
    Setting{"admin.request_timeout", "OUTBOX_ADMIN_REQUEST_TIMEOUT",
            [](Config& c, const Value& v) { c.admin.request_timeout = to_duration(v, 100ms, 10min); }, "10s",
            "a whole admin request (line, headers, body) must arrive within this, or it is answered 408"},
    Setting{"admin.max_connections_per_client", "OUTBOX_ADMIN_MAX_CONNECTIONS_PER_CLIENT",
            [](Config& c, const Value& v) { c.admin.max_connections_per_client = to_int(v, 1, 65536); }, "32",
            "open admin connections from one client address; more are answered 503"},
    Setting{"admin.max_connections", "OUTBOX_ADMIN_MAX_CONNECTIONS",
            [](Config& c, const Value& v) { c.admin.max_connections = to_int(v, 1, 65536); }, "512",
            "open admin connections in total; more are answered 503"},
    Setting{"admin.db_connections", "OUTBOX_ADMIN_DB_CONNECTIONS",
            [](Config& c, const Value& v) { c.admin.db_connections = to_int(v, 1, 1000); }, "4",
            "database connections of admin API requests (the probes have 2 of their own)"},
    // The upper bound (db_connections) is checked once both are known.
    Setting{"admin.db_connections_per_company", "OUTBOX_ADMIN_DB_CONNECTIONS_PER_COMPANY",
            [](Config& c, const Value& v) { c.admin.db_connections_per_company = to_int(v, 1, 1000); }, "2",
            "admin API requests of one company (platform roles count as one) using the database at once; more are "
            "answered 503 `BUSY`, so one tenant cannot take every connection; at most `admin.db_connections`"},
    Setting{"admin.platform_roles", "OUTBOX_ADMIN_PLATFORM_ROLES",
            [](Config& c, const Value& v) { c.admin.platform_roles = to_roles(v); }, "PLATFORM_ADMIN",
            "JWT roles allowed on platform endpoints (`/api/v1/admin/fleet`, handler pause/resume)",
            "a list of role names (the variable: comma-separated)"},
    Setting{"admin.metrics_cache", "OUTBOX_ADMIN_METRICS_CACHE",
            [](Config& c, const Value& v) { c.admin.metrics_cache = to_duration(v, 0ms, 1h); }, "5s",
            "`/metrics` database gauges and each company's console overview are computed at most once per this"},
    Setting{"admin.console", "OUTBOX_ADMIN_CONSOLE", [](Config& c, const Value& v) { c.admin.console = to_bool(v); },
            "true", "serve the operator console at `/console/` on `admin.listen`; `false`: `/console/` answers 404"},
    Setting{"admin.console_token_header", "OUTBOX_ADMIN_CONSOLE_TOKEN_HEADER",
            [](Config& c, const Value& v) { c.admin.console_token_header = to_header_name(v); }, "(none)",
            "a request header a reverse proxy fills with the operator's JWT; the console signs in with it "
            "(`GET /console/session`)",
            "an HTTP header name"},
    Setting{"telemetry.otlp_endpoint", "OUTBOX_TELEMETRY_OTLP_ENDPOINT",
            [](Config& c, const Value& v) { c.telemetry.otlp_endpoint = to_otlp_endpoint(v); }, "(none)",
            "where spans go, over OTLP/HTTP (protobuf), e.g. `http://127.0.0.1:4318/v1/traces`; unset: no spans",
            "an `http://host:port/path` URL"},
    Setting{"telemetry.service_name", "OUTBOX_TELEMETRY_SERVICE_NAME",
            [](Config& c, const Value& v) { c.telemetry.service_name = to_service_name(v); }, "outboxd",
            "the spans' `service.name`", "1 to 100 printable ASCII characters"},
    Setting{"log.level", "OUTBOX_LOG_LEVEL",
            [](Config& c, const Value& v) {
                c.log.level = to_choice(v, {"trace", "debug", "info", "warn", "error"});
            },
            "info", "the least severe level written"},
    Setting{"log.format", "OUTBOX_LOG_FORMAT",
            [](Config& c, const Value& v) {
                c.log.format = to_choice(v, {"text", "json"});
            },
            "text", "`json`: one object per line"},
};

constexpr std::string_view kSecretEnv = "OUTBOX_ADMIN_JWT_SECRET";
constexpr std::size_t kMinSecretBytes = 32;  // HS256 keys shorter than its 256-bit output are guessable offline
constexpr std::array<std::string_view, 7> kSections{"database", "outbox", "plugins", "admin", "telemetry", "log",
                                                    "handlers"};

// The keys of a `handlers.<name>` section, declared like kSettings (file only, no variable).
// `config` is a mapping handed to the plugin; the others are scalars parsed by `apply`.
struct HandlerKey {
    std::string_view name;
    void (*apply)(HandlerSettings&, const Value&);
    std::string_view default_value;
    std::string_view description;
    std::string_view type = {};
};

const std::array kHandlerKeys{
    HandlerKey{"max_concurrency", [](HandlerSettings& h, const Value& v) { h.max_concurrency = to_int(v, 1, 10000); },
               "(none)", "calls in flight **across the whole fleet**"},
    HandlerKey{"rate_limit_per_second",
               [](HandlerSettings& h, const Value& v) { h.rate_limit_per_second = to_rate(v); }, "(none)",
               "call starts per second **across the whole fleet**"},
    HandlerKey{"timeout", [](HandlerSettings& h, const Value& v) { h.timeout = to_duration(v, 1ms, 24h); },
               "(= `outbox.handler_timeout`)", "the handler call's deadline (`ctx.deadline()`)"},
    HandlerKey{"config", nullptr, "{}", "free-form, handed to the plugin as JSON; keys that look like secrets "
               "are refused", "a mapping"},
};

// What a key accepts, for the reference: the parser's own words. A probe value beyond every
// range (and not a number) makes each parser say what it expects; a parser that takes any
// text says nothing, and `type` (or "text") describes it.
template <class Target, class Apply>
std::string allowed_text(std::string_view key, Apply apply, std::string_view type) {
    if (!type.empty()) return std::string(type);
    constexpr std::string_view kOrigin = "reference";
    Target scratch;
    try {
        apply(scratch, Value{key, Raw{"100000d", std::string(kOrigin)}});
        return "text";
    } catch (const ConfigError& e) {
        std::string text = e.what();
        const std::string marker = "(from " + std::string(kOrigin) + "): ";
        if (const auto at = text.find(marker); at != std::string::npos) text = text.substr(at + marker.size());
        if (text.rfind("expected ", 0) == 0) text = text.substr(9);
        for (const auto& [from, to] : {std::pair<std::string_view, std::string_view>{"an integer from ", "integer, "},
                                       {"a duration from ", "duration, "},
                                       {"a number ", "number, "},
                                       {"true or false", "boolean"}}) {
            if (text.rfind(from, 0) == 0) text = std::string(to) + text.substr(from.size());
        }
        return text;
    }
}

std::string markdown_cell(std::string_view text) {
    std::string cell;
    for (const char c : text) {
        if (c == '|') cell += '\\';
        cell += c;
    }
    return cell;
}

// --- YAML walking -------------------------------------------------------------------------

class FileReader {
public:
    explicit FileReader(std::string source) : source_(std::move(source)) {}

    std::string origin(const YAML::Node& node) const {
        const YAML::Mark mark = node.Mark();
        return mark.is_null() ? source_ : source_ + ":" + std::to_string(mark.line + 1);
    }

    // A key's value; an empty value (`key:`) has no useful mark of its own, so use the key's.
    std::string origin(const YAML::Node& key, const YAML::Node& value) const {
        return value.IsNull() ? origin(key) : origin(value);
    }

    static std::string kind(const YAML::Node& node) {
        switch (node.Type()) {
            case YAML::NodeType::Map: return "a mapping";
            case YAML::NodeType::Sequence: return "a list";
            case YAML::NodeType::Null: return "nothing";
            default: return "a scalar";
        }
    }

    // Iterates a mapping, rejecting duplicate and non-scalar keys, which yaml-cpp accepts silently.
    template <class Visit>
    void each_entry(const std::string& path, const YAML::Node& map, Visit&& visit) const {
        std::set<std::string> seen;
        for (const auto& entry : map) {
            const YAML::Node key = entry.first;  // copies: the iterator hands out proxies
            if (!key.IsScalar()) fail_at(path.empty() ? "(top level)" : path, origin(key), "keys must be plain names");
            const std::string name = key.Scalar();
            const std::string full = path.empty() ? name : path + "." + name;
            if (!seen.insert(name).second) fail_at(full, origin(key), "duplicate key");
            visit(full, name, key, YAML::Node(entry.second));
        }
    }

    void require_map(const std::string& path, const YAML::Node& key, const YAML::Node& value) const {
        if (!value.IsMap()) {
            fail_at(path, origin(key, value), "expected a mapping of " + path + " settings, got " + kind(value));
        }
    }

    Raw scalar(const std::string& path, const YAML::Node& key, const YAML::Node& value) const {
        // The one list-valued key: its items are joined with commas, as its variable is written.
        if (path == "admin.platform_roles" && value.IsSequence()) {
            std::string joined;
            for (const auto& item : value) {
                if (!item.IsScalar()) fail_at(path, origin(key, value), "expected a list of role names");
                joined += (joined.empty() ? "" : ",") + item.Scalar();
            }
            return Raw{joined, origin(value)};
        }
        if (!value.IsScalar()) fail_at(path, origin(key, value), "expected a single value, got " + kind(value));
        return Raw{value.Scalar(), origin(value)};
    }

private:
    std::string source_;
};

std::string closest(std::string_view word, const std::vector<std::string_view>& candidates) {
    // Levenshtein distance: a typo one or two edits away gets a suggestion.
    auto distance = [](std::string_view a, std::string_view b) {
        std::vector<std::size_t> row(b.size() + 1);
        for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            std::size_t diagonal = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= b.size(); ++j) {
                const std::size_t above = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
                diagonal = above;
            }
        }
        return row[b.size()];
    };
    std::string best;
    // Close enough to be a typo, but not so loose that short words match anything.
    std::size_t best_distance = std::min<std::size_t>(3, (word.size() + 1) / 2);
    for (const auto candidate : candidates) {
        const std::size_t d = distance(word, candidate);
        if (d < best_distance) {
            best_distance = d;
            best = candidate;
        }
    }
    return best;
}

[[noreturn]] void fail_unknown(const std::string& full, std::string_view name, const std::string& origin,
                               const std::vector<std::string_view>& allowed) {
    std::string message = "unknown key";
    if (const std::string guess = closest(name, allowed); !guess.empty()) message += " (did you mean " + guess + "?)";
    message += "; allowed here:";
    for (std::size_t i = 0; i < allowed.size(); ++i) message += (i == 0 ? " " : ", ") + std::string(allowed[i]);
    fail_at(full, origin, message);
}

bool is_secret_name(std::string_view name) {
    const std::string key = lower(name);
    if (ends_with(key, "_env")) return false;
    return ends_with(key, "secret") || ends_with(key, "password") || ends_with(key, "token") ||
           ends_with(key, "api_key");
}

nlohmann::ordered_json plain_scalar(const std::string& text) {
    if (text == "true" || text == "True" || text == "TRUE") return true;
    if (text == "false" || text == "False" || text == "FALSE") return false;
    if (const auto integer = parse_number<std::int64_t>(text)) return *integer;
    if (const auto number = parse_number<double>(text); number && std::isfinite(*number)) return *number;
    return text;
}

// handlers.<name>.config is the plugin's own business, except that secrets never live in it.
nlohmann::ordered_json to_json(const FileReader& file, const std::string& path, const YAML::Node& node) {
    switch (node.Type()) {
        case YAML::NodeType::Map: {
            auto object = nlohmann::ordered_json::object();
            file.each_entry(
                path, node,
                [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
                    if (is_secret_name(name)) {
                        fail_at(full, file.origin(key),
                                "secrets must not be written in the configuration file; put the secret in an "
                                "environment variable and give that variable's name as " +
                                    name + "_env");
                    }
                    object[name] = to_json(file, full, value);
                });
            return object;
        }
        case YAML::NodeType::Sequence: {
            auto array = nlohmann::ordered_json::array();
            for (std::size_t i = 0; i < node.size(); ++i) {
                array.push_back(to_json(file, path + "[" + std::to_string(i) + "]", node[i]));
            }
            return array;
        }
        case YAML::NodeType::Scalar:
            // yaml-cpp tags plain scalars "?"; quoted or explicitly tagged ones stay strings.
            return node.Tag() == "?" ? plain_scalar(node.Scalar()) : nlohmann::ordered_json(node.Scalar());
        default: return nullptr;
    }
}

HandlerSettings read_handler(const FileReader& file, const std::string& path, const YAML::Node& section) {
    HandlerSettings settings;
    std::vector<std::string_view> allowed;
    for (const auto& handler_key : kHandlerKeys) allowed.push_back(handler_key.name);
    file.each_entry(
        path, section,
        [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
            const auto* handler_key = std::find_if(kHandlerKeys.begin(), kHandlerKeys.end(),
                                                   [&](const HandlerKey& k) { return k.name == name; });
            if (handler_key == kHandlerKeys.end()) fail_unknown(full, name, file.origin(key), allowed);
            if (handler_key->apply != nullptr) {
                handler_key->apply(settings, Value{full, file.scalar(full, key, value)});
                return;
            }
            if (value.IsNull()) return;
            if (!value.IsMap()) {
                fail_at(full, file.origin(key, value), "expected a mapping, got " + FileReader::kind(value));
            }
            settings.config_json =
                to_json(file, full, value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        });
    return settings;
}

class IgnoreEvents final : public YAML::EventHandler {
public:
    void OnDocumentStart(const YAML::Mark&) override {}
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
    void OnMapEnd() override {}
};

YAML::Node load_document(const std::string& yaml_text, const std::string& source) {
    try {
        // Count at most two documents before building one: yaml-cpp 0.7's LoadAll never
        // ends on some malformed text (a lone "," is an endless run of empty documents).
        std::istringstream in(yaml_text);
        YAML::Parser parser(in);
        IgnoreEvents ignore;
        int documents = 0;
        while (documents < 2 && parser.HandleNextDocument(ignore)) ++documents;
        if (documents > 1) throw ConfigError(source + ": expected one YAML document, found more than one");
        return documents == 0 ? YAML::Node() : YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        std::string where = source;
        if (!e.mark.is_null()) where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
        throw ConfigError(where + ": YAML syntax error: " + e.msg);
    }
}

// Reads the file into `raw` (scalar settings by key) and `config.handlers`.
void read_file(const FileReader& file, const YAML::Node& root, std::map<std::string, Raw, std::less<>>& raw,
               Config& config) {
    if (root.IsNull()) return;
    if (!root.IsMap()) {
        fail_at("(top level)", file.origin(root), "expected a mapping of sections, got " + FileReader::kind(root));
    }
    const std::vector<std::string_view> sections(kSections.begin(), kSections.end());
    file.each_entry(
        "", root,
        [&](const std::string& section, const std::string&, const YAML::Node& section_key, const YAML::Node& body) {
            if (std::find(kSections.begin(), kSections.end(), section) == kSections.end()) {
                fail_unknown(section, section, file.origin(section_key), sections);
            }
            if (body.IsNull()) return;  // every key commented out
            file.require_map(section, section_key, body);
            if (section == "handlers") {
                file.each_entry(section, body,
                                [&](const std::string& full, const std::string& name, const YAML::Node& key,
                                    const YAML::Node& value) {
                                    if (value.IsNull()) {
                                        config.handlers[name] = HandlerSettings{};
                                        return;
                                    }
                                    file.require_map(full, key, value);
                                    config.handlers[name] = read_handler(file, full, value);
                                });
                return;
            }
            std::vector<std::string_view> allowed;
            for (const auto& setting : kSettings) {
                if (setting.key.substr(0, setting.key.find('.')) == section)
                    allowed.push_back(setting.key.substr(section.size() + 1));
            }
            file.each_entry(
                section, body,
                [&](const std::string& full, const std::string& name, const YAML::Node& key, const YAML::Node& value) {
                    if (full == "admin.jwt_secret") {
                        fail_at(full, file.origin(key),
                                "secrets are never read from the configuration file; set " + std::string(kSecretEnv) +
                                    " in the environment instead");
                    }
                    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
                        fail_unknown(full, name, file.origin(key), allowed);
                    }
                    raw[full] = file.scalar(full, key, value);
                });
        });
}

// A token policy that cannot be configured weak. Neither message quotes the secret.
void check_admin_keys(const Config& config, const std::map<std::string, Raw, std::less<>>& raw) {
    const std::size_t secret_bytes = config.admin.jwt_secret.size();
    if (secret_bytes > 0 && secret_bytes < kMinSecretBytes) {
        throw ConfigError(std::string(kSecretEnv) + " is shorter than " + std::to_string(kMinSecretBytes) +
                          " bytes; an HS256 secret that short can be guessed from any one token: use at least " +
                          std::to_string(kMinSecretBytes) + " random bytes (e.g. openssl rand -base64 48)");
    }
    // An RS256 key usually belongs to an identity provider that also signs tokens for other
    // applications; only the audience tells this API's tokens apart.
    if (!config.admin.jwt_public_key_file.empty() && config.admin.jwt_audience.empty()) {
        const auto key = raw.find("admin.jwt_public_key_file");
        throw ConfigError("admin.jwt_audience is required when admin.jwt_public_key_file is set (from " +
                          (key != raw.end() ? key->second.origin : std::string("default")) +
                          "): tokens from an identity provider shared with other applications must name this API "
                          "in aud; set admin.jwt_audience or OUTBOX_ADMIN_JWT_AUDIENCE");
    }
}

}  // namespace

ConfigError::ConfigError(const std::string& message) : std::runtime_error(one_line(message)) {}

HandlerSettings Config::handler(const std::string& handler_name) const {
    const auto it = handlers.find(handler_name);
    HandlerSettings settings = it == handlers.end() ? HandlerSettings{} : it->second;
    if (!settings.timeout) settings.timeout = outbox.handler_timeout;
    return settings;
}

EnvLookup process_environment() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        return value == nullptr ? std::nullopt : std::optional<std::string>(value);
    };
}

void remove_secret_from_environment() noexcept {
    const std::string name(kSecretEnv);
    if (char* value = std::getenv(name.c_str())) std::memset(value, 0, std::strlen(value));
    ::unsetenv(name.c_str());
}

Config parse_config(const std::string& yaml_text, const std::string& source, const EnvLookup& env) {
    Config config;
    const FileReader file(source);
    std::map<std::string, Raw, std::less<>> raw;
    read_file(file, load_document(yaml_text, source), raw, config);

    std::set<std::string_view> from_env;
    for (const auto& setting : kSettings) {
        if (auto value = env(std::string(setting.env))) {
            raw[std::string(setting.key)] = Raw{std::move(*value), std::string(setting.env)};
            from_env.insert(setting.key);
        }
    }
    for (const auto& setting : kSettings) {
        if (const auto it = raw.find(setting.key); it != raw.end()) {
            setting.apply(config, Value{setting.key, it->second, from_env.contains(setting.key)});
        }
    }
    if (auto secret = env(std::string(kSecretEnv))) config.admin.jwt_secret = std::move(*secret);
    check_admin_keys(config, raw);

    if (config.admin.db_connections_per_company > config.admin.db_connections) {
        const auto pool = raw.find("admin.db_connections");
        fail("admin.db_connections_per_company",
             raw.count("admin.db_connections_per_company") != 0
                 ? raw.at("admin.db_connections_per_company")
                 : Raw{std::to_string(config.admin.db_connections_per_company), "default"},
             "must be at most admin.db_connections (" + std::to_string(config.admin.db_connections) + ", from " +
                 (pool != raw.end() ? pool->second.origin : std::string("default")) + ")");
    }
    if (config.outbox.max_backoff < config.outbox.initial_backoff) {
        auto given = [&](std::string_view key, milliseconds value) {
            const auto it = raw.find(key);
            return it != raw.end() ? it->second : Raw{format_duration(value), "default"};
        };
        const Raw initial = given("outbox.initial_backoff", config.outbox.initial_backoff);
        fail("outbox.max_backoff", given("outbox.max_backoff", config.outbox.max_backoff),
             "must be at least outbox.initial_backoff (" + initial.text + ", from " + initial.origin +
                 ") and at most 7d");
    }
    return config;
}

Config load_config(const std::optional<std::string>& path, const EnvLookup& env) {
    if (!path) return parse_config({}, "(no configuration file)", env);
    std::error_code ec;
    if (std::filesystem::is_directory(*path, ec)) {
        throw ConfigError("cannot read configuration file " + *path + ": it is a directory");
    }
    std::ifstream in(*path, std::ios::binary);
    if (!in) throw ConfigError("cannot read configuration file " + *path + ": " + std::strerror(errno));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw ConfigError("cannot read configuration file " + *path + ": read error");
    return parse_config(text.str(), *path, env);
}

std::vector<SettingReference> settings_reference() {
    std::vector<SettingReference> rows;
    for (const auto& setting : kSettings) {
        rows.push_back({std::string(setting.key), std::string(setting.env),
                        allowed_text<Config>(setting.key, setting.apply, setting.type),
                        std::string(setting.default_value), std::string(setting.description)});
    }
    for (const auto& handler_key : kHandlerKeys) {
        const std::string key = "handlers.<name>." + std::string(handler_key.name);
        std::string type(handler_key.type);
        if (handler_key.apply != nullptr) type = allowed_text<HandlerSettings>(key, handler_key.apply, handler_key.type);
        rows.push_back({key, "", type, std::string(handler_key.default_value), std::string(handler_key.description)});
    }
    rows.push_back({"", std::string(kSecretEnv), "text, at least " + std::to_string(kMinSecretBytes) + " bytes",
                    "(none)", "the HS256 secret of admin tokens; from the environment only, never from the file"});
    return rows;
}

std::string config_reference_markdown() {
    std::string out =
        "| key | variable | accepts | default | meaning |\n"
        "|---|---|---|---|---|\n";
    auto code = [](const std::string& text) { return text.empty() ? std::string("—") : "`" + text + "`"; };
    for (const auto& row : settings_reference()) {
        // A default in parentheses is derived at run time and already formatted.
        const std::string shown_default = row.default_value.empty()        ? std::string("—")
                                          : row.default_value.front() == '(' ? row.default_value
                                                                             : code(row.default_value);
        out += "| " + code(row.key) + " | " + code(row.env) + " | " + markdown_cell(row.type) + " | " +
               markdown_cell(shown_default) + " | " + markdown_cell(row.description.empty() ? "—" : row.description) +
               " |\n";
    }
    return out;
}

}  // namespace outbox::config
