#include "config/settings_table.hpp"

namespace outbox::config {
namespace {

using namespace std::chrono_literals;

CircuitBreakerSettings& breaker(HandlerSettings& h) {
    if (!h.circuit_breaker) h.circuit_breaker.emplace();
    return *h.circuit_breaker;
}

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
            "`COMPLETED` and `DISCARDED` events older than this are deleted, and attempt history of that age"},
    Setting{"outbox.history_partition", "OUTBOX_HISTORY_PARTITION",
            [](Config& c, const Value& v) { c.outbox.history_partition = to_duration(v, 1min, 24h * 366); }, "1d",
            "the time range of one partition of the attempt history (`outbox_attempt`); retention drops whole "
            "partitions, so history stays up to this much longer than `outbox.retention`"},
    Setting{"outbox.attempt_history", "OUTBOX_ATTEMPT_HISTORY",
            [](Config& c, const Value& v) { c.outbox.attempt_history = to_choice(v, {"all", "failures", "off"}); },
            "all",
            "which handler calls `outbox_attempt` records: `all`, `failures` (every call that did not succeed, and "
            "lost hosts) or `off`"},
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
    Setting{"tenants.default_max_concurrency", "OUTBOX_TENANTS_DEFAULT_MAX_CONCURRENCY",
            [](Config& c, const Value& v) { c.tenants.default_max_concurrency = to_int(v, 1, 100000); }, "(unlimited)",
            "events of one company in flight **across the whole fleet**, for every company without its own "
            "`max_concurrency` ([Fair tenants](#fair-tenants))"},
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

const std::array kHandlerKeys{
    HandlerKey{"max_concurrency", [](HandlerSettings& h, const Value& v) { h.max_concurrency = to_int(v, 1, 10000); },
               "(none)", "calls in flight **across the whole fleet**"},
    HandlerKey{"rate_limit_per_second",
               [](HandlerSettings& h, const Value& v) { h.rate_limit_per_second = to_rate(v); }, "(none)",
               "call starts per second **across the whole fleet**"},
    HandlerKey{"timeout", [](HandlerSettings& h, const Value& v) { h.timeout = to_duration(v, 1ms, 24h); },
               "(= `outbox.handler_timeout`)", "the handler call's deadline (`ctx.deadline()`)"},
    // A mapping in the file (`commit_group: {max_events: 32, max_wait: 20ms}`); a section
    // without max_events is refused rather than silently leaving grouping off.
    HandlerKey{"commit_group.max_events",
               [](HandlerSettings& h, const Value& v) { h.commit_group.max_events = to_int(v, 2, 64); }, "(off)",
               "events whose `ctx.db()` work shares one transaction, each in its own savepoint "
               "(docs/plugins.md#commit-grouping); at most 64, PostgreSQL's cache of subtransactions per session"},
    HandlerKey{"commit_group.max_wait",
               [](HandlerSettings& h, const Value& v) { h.commit_group.max_wait = to_duration(v, 1ms, 10s); }, "20ms",
               "how long a group's transaction stays open for further events after its first statement"},
    HandlerKey{"config", nullptr, "{}", "free-form, handed to the plugin as JSON; keys that look like secrets "
               "are refused", "a mapping"},
    // The breaker is a mapping of its own keys, each listed below it; writing the mapping
    // (`circuit_breaker: {}` for every default) turns it on.
    HandlerKey{"circuit_breaker", nullptr, "(off)",
               "pause the handler on every host while its calls fail, probe after a cool-down "
               "([Circuit breaker](#circuit-breaker)); `{}` turns it on with the defaults below",
               "a mapping of the four keys below"},
    HandlerKey{"circuit_breaker.failure_ratio",
               [](HandlerSettings& h, const Value& v) { breaker(h).failure_ratio = to_ratio(v); }, "0.5",
               "the share of retryable failures among the handler's calls in the window that opens the breaker"},
    HandlerKey{"circuit_breaker.min_calls",
               [](HandlerSettings& h, const Value& v) { breaker(h).min_calls = to_int(v, 1, 1000000); }, "20",
               "the share counts only with at least this many calls in the window"},
    HandlerKey{"circuit_breaker.window",
               [](HandlerSettings& h, const Value& v) { breaker(h).window = to_duration(v, 1ms, 24h); }, "30s",
               "the sliding window of calls (each host judges its own calls)"},
    HandlerKey{"circuit_breaker.cool_down",
               [](HandlerSettings& h, const Value& v) { breaker(h).cool_down = to_duration(v, 1ms, 24h); }, "30s",
               "how long the breaker stays open before one probe call, and again after a failed probe"},
};

const std::array kTenantKeys{
    TenantKey{"max_concurrency",
              [](TenantSettings& t, const Value& v) { t.max_concurrency = to_int(v, 1, 100000); },
              "(= `tenants.default_max_concurrency`)", "this company's events in flight **across the whole fleet**"},
    TenantKey{"weight", [](TenantSettings& t, const Value& v) { t.weight = to_int(v, 1, 1000); }, "1",
              "this company's share of each claim, against the weights of the other companies with due events"},
};

}  // namespace

std::span<const Setting> settings_table() { return kSettings; }

std::span<const HandlerKey> handler_keys() { return kHandlerKeys; }

std::span<const TenantKey> tenant_keys() { return kTenantKeys; }

}  // namespace outbox::config
