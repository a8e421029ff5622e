#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace outbox::config {

using std::chrono::milliseconds;

/// A bad configuration value. what() is the one line printed before exit code 2: the key
/// (and the environment variable it came from), the value, and what is allowed. Keys,
/// handler names and parser messages come from the file, so the constructor shows control
/// characters as '?': whatever a throw site quotes, the message stays one line and cannot
/// forge log lines.
class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(const std::string& message);
};

/// Where the admin listener binds.
struct ListenAddress {
    std::string host;  // an IP address or name; IPv6 without brackets
    int port = 0;      // 0: any free port (tests only; the file and environment need 1..65535)
    bool operator==(const ListenAddress&) const = default;
};

/// handlers.<name>.circuit_breaker: the fleet pauses the handler while its calls fail (see
/// docs/operations.md, "Circuit breaker"). Each value has the documented default.
struct CircuitBreakerSettings {
    double failure_ratio = 0.5;  // share of retryable failures, in (0, 1], that opens it
    int min_calls = 20;          // calls in the window before the share counts
    milliseconds window{std::chrono::seconds{30}};     // the sliding window the share is taken over
    milliseconds cool_down{std::chrono::seconds{30}};  // open this long before a probe call
    bool operator==(const CircuitBreakerSettings&) const = default;
};

struct HandlerSettings {
    std::optional<int> max_concurrency;         // fleet-wide calls in flight
    std::optional<double> rate_limit_per_second;  // fleet-wide call starts per second
    /// The deadline of one call (ctx.deadline()); unset in the file: outbox.handler_timeout.
    /// Config::handler() always returns it set.
    std::optional<milliseconds> timeout;
    std::string config_json = "{}";  // the `config:` section as JSON
    std::optional<CircuitBreakerSettings> circuit_breaker;  // unset: no breaker (opt-in)
    /// handlers.<name>.commit_group: several events' work through ctx.db() shares one
    /// transaction, each event in a savepoint of its own (docs/plugins.md, "Commit grouping").
    struct CommitGroup {
        int max_events = 0;  // events per transaction; 0: off (each event commits alone)
        /// How long a group's transaction stays open taking further events after its first
        /// statement; then it commits after the call running at that moment.
        milliseconds max_wait{20};
        bool operator==(const CommitGroup&) const = default;
    };
    CommitGroup commit_group;
    bool operator==(const HandlerSettings&) const = default;
};

/// tenants.companies.<company_id>: one company's share of claims and its cap.
struct TenantSettings {
    std::optional<int> max_concurrency;  // its events in flight across the fleet; unset: the default cap
    int weight = 1;                      // its share of each claim against the other companies with due events
    bool operator==(const TenantSettings&) const = default;
};

struct Config {
    struct Database {
        std::string url;  // empty: libpq's defaults (PGHOST, PGDATABASE, ...)
        int pool_size = 4;
        milliseconds connect_timeout{std::chrono::seconds{5}};
        milliseconds keepalives_idle{std::chrono::seconds{10}};
        milliseconds tcp_user_timeout{std::chrono::seconds{20}};
        milliseconds call_timeout{std::chrono::seconds{10}};  // host-kept bound of one database call
        milliseconds startup_timeout{std::chrono::seconds{60}};  // 0: fail at once
        /// A direct (unpooled) connection for what needs a session: LISTEN and migrations.
        std::string session_url;  // empty: none
        /// "session": `url` keeps one server session per connection (direct, or a pooler in
        /// session mode). "transaction": `url` is a pooler in transaction mode, so no
        /// connection on it carries session state.
        std::string pool_mode = "session";
        /// Refuse to start when database.url's role is a superuser, owns the outbox tables
        /// or is a member of their owner (otherwise one warning line).
        bool require_least_privilege = false;
        bool operator==(const Database&) const = default;
    } database;
    struct Outbox {
        bool enabled = true;
        milliseconds poll_interval{std::chrono::seconds{1}};
        int batch_size = 20;
        milliseconds lease_duration{std::chrono::minutes{5}};
        int max_attempts = 8;
        milliseconds initial_backoff{std::chrono::seconds{1}};
        milliseconds max_backoff{std::chrono::minutes{5}};
        int concurrency = 8;
        milliseconds shutdown_timeout{std::chrono::seconds{30}};
        milliseconds handler_timeout{std::chrono::seconds{60}};
        milliseconds abandon_grace{std::chrono::seconds{10}};
        std::optional<int> max_abandoned_threads;  // unset: = concurrency
        milliseconds retention{std::chrono::hours{24 * 7}};
        /// The width of one outbox_attempt partition: retention drops whole partitions.
        milliseconds history_partition{std::chrono::hours{24}};
        /// Which handler calls outbox_attempt keeps: "all", "failures" or "off".
        std::string attempt_history = "all";
        std::string host_id;  // empty: "<hostname>:<pid>"
        /// outbox_publish() refuses event types not in the registry. Applications do not read
        /// this file: `outboxd migrate` and `outboxd event-types apply` store it in the
        /// database (outbox_setting), where outbox_publish() reads it.
        bool require_registered_types = false;
        bool operator==(const Outbox&) const = default;
    } outbox;
    struct Plugins {
        std::string dir = "/usr/lib/outboxd/plugins";
        bool operator==(const Plugins&) const = default;
    } plugins;
    struct Admin {
        std::string listen = "127.0.0.1:8080";  // as written, for messages; "off" disables the listener
        std::optional<ListenAddress> listen_address = ListenAddress{"127.0.0.1", 8080};  // parsed once; none: off
        std::string jwt_secret;                 // OUTBOX_ADMIN_JWT_SECRET only, never from YAML
        std::string jwt_public_key_file;        // RS256 public key (PEM)
        std::string jwt_issuer;
        std::string jwt_audience;               // required with jwt_public_key_file
        milliseconds jwt_max_lifetime{std::chrono::hours{1}};  // longest exp - iat accepted
        milliseconds request_timeout{std::chrono::seconds{10}};  // whole-request deadline (head and body)
        int max_connections_per_client = 32;    // open connections from one client address
        int max_connections = 512;              // open connections in total
        int db_connections = 4;                 // the admin API's database pool
        int db_connections_per_company = 2;     // of those, the most one company's requests hold at once
        milliseconds metrics_cache{std::chrono::seconds{5}};  // /metrics database gauges reused this long
        std::vector<std::string> platform_roles{"PLATFORM_ADMIN"};  // JWT roles that may use the platform endpoints
        bool console = true;                    // serve the operator console at /console/
        std::string console_token_header;       // a proxy's header carrying the operator's JWT; empty: none
        bool operator==(const Admin&) const = default;
    } admin;
    struct Telemetry {
        /// OTLP/HTTP traces endpoint ("http://host:port/path"); empty: no spans are exported.
        std::string otlp_endpoint;
        std::string service_name = "outboxd";
        bool operator==(const Telemetry&) const = default;
    } telemetry;
    struct Log {
        std::string level = "info";
        std::string format = "text";  // or "json"
        bool operator==(const Log&) const = default;
    } log;
    struct Tenants {
        std::optional<int> default_max_concurrency;  // unset: unlimited
        std::map<std::string, TenantSettings> companies;
        bool operator==(const Tenants&) const = default;
    } tenants;
    std::map<std::string, HandlerSettings> handlers;

    /// Settings for `handler_name`, defaults when the file has no section for it.
    [[nodiscard]] HandlerSettings handler(const std::string& handler_name) const;

    // Member-wise, so a test can tell whether a documented default is the built-in one.
    bool operator==(const Config&) const = default;
};

/// Looks up an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();

/// Removes OUTBOX_ADMIN_JWT_SECRET from the process environment, overwriting its value
/// first so that /proc/self/environ no longer shows it either. Plugins run in-process and
/// could otherwise read it, or pass it to a process they start. Call once the config is
/// loaded, before any thread or plugin starts; nothing reads the variable afterwards.
void remove_secret_from_environment() noexcept;

/// Parses YAML text (may be empty) and applies OUTBOX_* overrides from `env`. Unknown
/// keys, wrong types, out-of-range values and secrets written into the file are errors.
/// `source` names the text in error messages (a file path).
Config parse_config(const std::string& yaml_text, const std::string& source, const EnvLookup& env);

/// Reads and parses `path`; no path: defaults and environment only.
Config load_config(const std::optional<std::string>& path, const EnvLookup& env);

/// One configuration key as the reference documents it, taken from the settings table in
/// settings_table.cpp (the one place keys are declared).
struct SettingReference {
    std::string key;            // "outbox.batch_size", "handlers.<name>.timeout"
    std::string env;            // its OUTBOX_* variable; empty: the file only
    std::string type;           // what the parser accepts, e.g. "integer, 1 to 1000"
    std::string default_value;  // as written in the file; in parentheses when derived at run time
    std::string description;
};

/// Every key, in table order, then the handler keys, the company keys and the environment-only secret.
std::vector<SettingReference> settings_reference();

/// The configuration reference in Markdown (`outboxd config reference`; docs/operations.md
/// embeds it between markers).
std::string config_reference_markdown();

}  // namespace outbox::config
