#include "admin/admin_server.hpp"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "admin/bounded_task_queue.hpp"
#include "admin/db_probe.hpp"
#include "admin/event_query.hpp"
#include "admin/retry_service.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "fleet/fleet_registry.hpp"
#include "log/log.hpp"
#include "metrics/prometheus.hpp"

namespace outbox::admin {
namespace {

using nlohmann::json;

constexpr int kConnectTimeoutSeconds = 2;
constexpr const char* kJson = "application/json";

// A dead or black-holed database must not hold a request thread for libpq's default
// (unbounded) connect time.
// An admin request waits this long for a pooled connection, then answers 503 BUSY.
constexpr auto kPoolWait = std::chrono::seconds{2};

std::string with_connect_timeout(const std::string& url) {
    if (url.find("connect_timeout") != std::string::npos) return url;
    const std::string param = "connect_timeout=" + std::to_string(kConnectTimeoutSeconds);
    if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
        return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
    }
    return url.empty() ? param : url + " " + param;
}

std::string display(const ListenAddress& address) {
    const bool v6 = address.host.find(':') != std::string::npos;
    return (v6 ? "[" + address.host + "]" : address.host) + ":" + std::to_string(address.port);
}

void send_error(httplib::Response& res, int status, const std::string& code, const std::string& message,
                json extra = json::object()) {
    json error{{"code", code}, {"message", message}};
    for (auto& [key, value] : extra.items()) error[key] = value;
    res.status = status;
    res.set_content(json{{"error", std::move(error)}}.dump(), kJson);
}

std::optional<std::string> query_param(const httplib::Request& req, const char* name) {
    if (!req.has_param(name)) return std::nullopt;
    return req.get_param_value(name);
}

struct Route {
    const char* method;
    std::regex pattern;
    std::function<void(const httplib::Request&, httplib::Response&, const std::smatch&)> handler;
};

}  // namespace

AdminOptions AdminOptions::from(const config::Config& config, const std::string& host_id) {
    AdminOptions o;
    if (config.admin.listen_address) o.listen = *config.admin.listen_address;
    o.database_url = config.database.url;
    o.host_id = host_id;
    o.processing_enabled = config.outbox.enabled;
    o.jwt.hs256_secret = config.admin.jwt_secret;
    o.jwt.issuer = config.admin.jwt_issuer;
    o.jwt.audience = config.admin.jwt_audience;
    o.jwt.max_lifetime = config.admin.jwt_max_lifetime;
    if (!config.admin.jwt_public_key_file.empty()) {
        const std::string& path = config.admin.jwt_public_key_file;
        std::ifstream file(path, std::ios::binary);
        std::stringstream text;
        text << file.rdbuf();
        if (!file) {
            throw config::ConfigError("admin.jwt_public_key_file = \"" + path + "\": cannot read the file");
        }
        o.jwt.rs256_public_key_pem = text.str();
        if (o.jwt.rs256_public_key_pem.find("-----BEGIN PUBLIC KEY-----") == std::string::npos &&
            o.jwt.rs256_public_key_pem.find("-----BEGIN RSA PUBLIC KEY-----") == std::string::npos) {
            throw config::ConfigError("admin.jwt_public_key_file = \"" + path +
                                      "\": expected a PEM RSA public key (-----BEGIN PUBLIC KEY-----)");
        }
    }
    return o;
}

struct AdminServer::Impl {
    Impl(AdminOptions o, const metrics::Metrics& m, HandlerSource h)
        : options(std::move(o)), metrics(m), handler_source(std::move(h)), verifier(options.jwt),
          pool(with_connect_timeout(options.database_url), options.db_connections) {
        routes.push_back({"GET", std::regex("^/healthz$"), [this](auto&, auto& res, auto&) { healthz(res); }});
        routes.push_back({"GET", std::regex("^/readyz$"), [this](auto&, auto& res, auto&) { readyz(res); }});
        routes.push_back({"GET", std::regex("^/metrics$"), [this](auto&, auto& res, auto&) { metrics_page(res); }});
        routes.push_back({"GET", std::regex("^/api/v1/admin/outbox-events$"),
                          [this](auto& req, auto& res, auto&) { list_events(req, res); }});
        routes.push_back({"GET", std::regex("^/api/v1/admin/outbox-events/([^/]+)$"),
                          [this](auto& req, auto& res, auto& m) { get_event(req, res, m[1].str()); }});
        routes.push_back({"GET", std::regex("^/api/v1/admin/fleet$"), [this](auto& req, auto& res, auto&) { fleet(req, res); }});
        routes.push_back({"POST", std::regex("^/api/v1/admin/outbox-events/([^/]+)/retry$"),
                          [this](auto& req, auto& res, auto& m) { retry_event(req, res, m[1].str()); }});
    }

    void configure() {
        const auto threads = static_cast<std::size_t>(options.threads < 1 ? 1 : options.threads);
        server.new_task_queue = [threads] { return new BoundedTaskQueue(threads, threads * 4); };
        server.set_payload_max_length(options.max_body_bytes);
        server.set_read_timeout(options.io_timeout);
        server.set_write_timeout(options.io_timeout);
        server.set_keep_alive_timeout(options.keep_alive_timeout.count());
        server.set_keep_alive_max_count(100);
        // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a
        // second host bind the same port silently instead of failing at start-up.
        server.set_socket_options([](socket_t sock) {
            int yes = 1;
            ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        });
        const auto dispatch = [this](const httplib::Request& req, httplib::Response& res) { route(req, res); };
        server.Get(".*", dispatch);
        server.Post(".*", dispatch);
        server.Put(".*", dispatch);
        server.Patch(".*", dispatch);
        server.Delete(".*", dispatch);
        server.Options(".*", dispatch);
        // Runs for every 4xx/5xx, including those httplib produces itself (400 bad request
        // line, 413, 414, 404 for methods it does not route): give them the JSON shape.
        server.set_error_handler(httplib::Server::HandlerWithResponse(
            [this](const httplib::Request& req, httplib::Response& res) {
                if (res.body.empty()) generic_error(req, res);
                return httplib::Server::HandlerResponse::Handled;
            }));
        server.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr) {
            // The path is not logged: it is caller-controlled text.
            log::error("admin API: unexpected failure handling a " + req.method + " request");
            send_error(res, 500, "INTERNAL", "internal error");
        });
    }

    void generic_error(const httplib::Request& req, httplib::Response& res) {
        switch (res.status) {
            case 400: send_error(res, 400, "BAD_REQUEST", "the request is malformed"); break;
            case 404:
                if (path_known(req.path)) {
                    send_error(res, 405, "METHOD_NOT_ALLOWED", "this path does not accept " + req.method);
                } else {
                    send_error(res, 404, "NOT_FOUND", "no such endpoint");
                }
                break;
            case 413:
                send_error(res, 413, "PAYLOAD_TOO_LARGE",
                           "the request body is larger than " + std::to_string(options.max_body_bytes) + " bytes");
                break;
            case 414: send_error(res, 414, "URI_TOO_LONG", "the request URI is too long"); break;
            default:
                send_error(res, res.status, res.status >= 500 ? "INTERNAL" : "BAD_REQUEST",
                           res.status >= 500 ? "internal error" : "the request was refused");
        }
    }

    [[nodiscard]] bool path_known(const std::string& path) const {
        return std::any_of(routes.begin(), routes.end(), [&](const Route& r) { return std::regex_match(path, r.pattern); });
    }

    void route(const httplib::Request& req, httplib::Response& res) {
        const std::string method = req.method == "HEAD" ? "GET" : req.method;
        std::string allowed;
        for (const auto& r : routes) {
            std::smatch match;
            if (!std::regex_match(req.path, match, r.pattern)) continue;
            if (method == r.method) {
                r.handler(req, res, match);
                return;
            }
            allowed += (allowed.empty() ? "" : ", ") + std::string(r.method);
        }
        if (allowed.empty()) {
            send_error(res, 404, "NOT_FOUND", "no such endpoint");
        } else {
            res.set_header("Allow", allowed);
            send_error(res, 405, "METHOD_NOT_ALLOWED", "this path accepts " + allowed);
        }
    }

    // ---- database access -------------------------------------------------------------

    /// Runs `work` on a pooled connection. A pooled connection the server closed while it was
    /// idle is replaced and the work retried (safe: nothing was committed on it); failing to
    /// open a connection at all is not retried, so an outage answers at once.
    /// `bound`: how long one call may take before the host drops its connection (default
    /// database.call_timeout); probes pass a short one so a silent server makes them fail
    /// fast instead of hanging.
    template <class Work>
    std::optional<db::DbFailure> try_database(Work&& work, std::optional<std::chrono::milliseconds> bound = std::nullopt) {
        constexpr int kAttempts = 3;
        for (int attempt = 1;; ++attempt) {
            std::optional<db::ConnectionPool::Handle> conn;
            try {
                conn.emplace(pool.acquire(std::chrono::steady_clock::now() + kPoolWait));
                db::CallGuard guard(**conn, std::chrono::steady_clock::now() +
                                                bound.value_or(db::connection_settings().call_timeout));
                work(**conn);
                return std::nullopt;
            } catch (...) {
                if (conn) conn->discard();
                const db::DbFailure failure = db::classify_db_error(std::current_exception());
                if (conn && failure.kind == db::DbFailureKind::ConnectionBroken && attempt < kAttempts) continue;
                return failure;
            }
        }
    }

    template <class Work>
    bool with_database(httplib::Response& res, Work&& work) {
        const auto failure = try_database(std::forward<Work>(work));
        if (!failure) return true;
        log::warn("admin API: database request failed: " + failure->describe());
        switch (failure->kind) {
            case db::DbFailureKind::ConnectionBroken:
                send_error(res, 503, "DATABASE_UNAVAILABLE", "the database is unreachable; try again later");
                break;
            case db::DbFailureKind::InDoubt:
                send_error(res, 503, "OUTCOME_UNKNOWN",
                           "the database connection was lost while committing; repeat a retry with the same "
                           "Idempotency-Key to learn its outcome");
                break;
            case db::DbFailureKind::Conflict: send_error(res, 503, "BUSY", "the database is busy; try again"); break;
            case db::DbFailureKind::Timeout:
                if (failure->sqlstate.empty()) {
                    send_error(res, 503, "BUSY", "every admin database connection is in use; try again");
                } else {
                    send_error(res, 503, "TIMEOUT", "the database did not answer in time; try again");
                }
                break;
            case db::DbFailureKind::Sql:
                if (failure->sqlstate == "55P03") {
                    send_error(res, 503, "BUSY", "the event is locked by another operation; try again");
                } else {
                    send_error(res, 500, "INTERNAL", "internal error");
                }
                break;
            case db::DbFailureKind::Other: send_error(res, 500, "INTERNAL", "internal error"); break;
        }
        return false;
    }

    // ---- authentication --------------------------------------------------------------

    std::optional<Principal> authenticate(const httplib::Request& req, httplib::Response& res) {
        res.set_header("WWW-Authenticate", "Bearer");
        if (!verifier.configured()) {
            send_error(res, 401, "AUTH_NOT_CONFIGURED",
                       "admin authentication is not configured on this host: set OUTBOX_ADMIN_JWT_SECRET (HS256) or "
                       "admin.jwt_public_key_file (RS256)");
            return std::nullopt;
        }
        const std::string header = req.get_header_value("Authorization");
        constexpr std::string_view kScheme = "bearer ";
        const bool bearer =
            header.size() > kScheme.size() &&
            std::equal(kScheme.begin(), kScheme.end(), header.begin(),
                       [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
        if (!bearer) {
            send_error(res, 401, "UNAUTHENTICATED", "an Authorization: Bearer <JWT> header is required");
            return std::nullopt;
        }
        std::string_view token = std::string_view(header).substr(kScheme.size());
        while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
        while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
        auto verified = verifier.verify(token, std::chrono::system_clock::now());
        if (auto* failure = std::get_if<AuthFailure>(&verified)) {
            send_error(res, 401, "INVALID_TOKEN", failure->message);
            return std::nullopt;
        }
        res.headers.erase("WWW-Authenticate");
        return std::get<Principal>(std::move(verified));
    }

    static bool may_read(const Principal& p) { return p.role == "ADMIN" || p.role == "HR" || p.role == "VIEWER"; }

    // One answer whether the event is missing or another company's, so the API never
    // tells a caller which event ids exist outside its company.
    static void not_accessible(httplib::Response& res) {
        send_error(res, 403, "EVENT_NOT_ACCESSIBLE", "no event with this id is accessible to your company");
    }

    static bool valid_event_id(httplib::Response& res, std::string& id) {
        static const std::regex pattern("^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$");
        if (!std::regex_match(id, pattern)) {
            send_error(res, 400, "INVALID_EVENT_ID", "the event id must be a UUID");
            return false;
        }
        std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        return true;
    }

    // ---- endpoints -------------------------------------------------------------------

    static void healthz(httplib::Response& res) { res.set_content(R"({"status":"ok"})", kJson); }

    void readyz(httplib::Response& res) {
        const auto failure = try_database([&](pqxx::connection& conn) { ping_database(conn, options.probe_timeout); },
                                          probe_bound());
        if (failure) {
            send_error(res, 503, "DATABASE_UNAVAILABLE", "the database does not answer (" + failure->describe() + ")");
            return;
        }
        if (options.processing_enabled && handlers()->entries().empty()) {
            send_error(res, 503, "NO_HANDLERS",
                       "no handler plugin is loaded while processing is enabled; check plugins.dir and the start-up log");
            return;
        }
        res.set_content(R"({"status":"ready"})", kJson);
    }

    [[nodiscard]] std::chrono::milliseconds probe_bound() const { return options.probe_timeout + std::chrono::seconds{1}; }

    void metrics_page(httplib::Response& res) {
        std::optional<metrics::DbGauges> gauges;
        const auto failure = try_database([&](pqxx::connection& conn) {
            gauges = read_db_gauges(conn, *handlers(), options.probe_timeout);
            const fleet::FleetView view = fleet::read_fleet(conn);
            for (const auto& host : view.hosts) {
                ++gauges->fleet_hosts[host.live ? "live" : host.stopped ? "stopped" : "gone"];
            }
            gauges->fleet_handler_mismatches = static_cast<long long>(view.mismatches.size());
        }, probe_bound());
        if (failure) {
            gauges.reset();
            log::debug("metrics: database gauges unavailable: " + failure->describe());
        }
        res.set_content(metrics::render_prometheus(metrics, gauges, {options.host_id, OUTBOXD_VERSION}),
                        metrics::kPrometheusContentType);
    }

    void list_events(const httplib::Request& req, httplib::Response& res) {
        const auto principal = authenticate(req, res);
        if (!principal) return;
        if (!may_read(*principal)) {
            send_error(res, 403, "FORBIDDEN", "the role " + principal->role + " may not read outbox events");
            return;
        }
        EventFilter filter;
        if (const auto error = parse_event_filter(query_param(req, "status"), query_param(req, "event_type"),
                                                  query_param(req, "limit"), query_param(req, "cursor"), filter)) {
            send_error(res, 400, error->code, error->message);
            return;
        }
        json page;
        if (!with_database(res, [&](pqxx::connection& conn) { page = EventQuery(conn).list(principal->company_id, filter); })) {
            return;
        }
        res.set_content(page.dump(), kJson);
    }

    // The fleet holds no tenant data: any authenticated operator role may read it.
    void fleet(const httplib::Request& req, httplib::Response& res) {
        const auto principal = authenticate(req, res);
        if (!principal) return;
        if (!may_read(*principal)) {
            send_error(res, 403, "FORBIDDEN", "the role " + principal->role + " may not read the fleet");
            return;
        }
        std::optional<fleet::FleetView> view;
        if (!with_database(res, [&](pqxx::connection& conn) { view = fleet::read_fleet(conn); })) return;
        res.set_content(fleet::to_json(*view).dump(), kJson);
    }

    void get_event(const httplib::Request& req, httplib::Response& res, std::string id) {
        const auto principal = authenticate(req, res);
        if (!principal) return;
        if (!may_read(*principal)) {
            send_error(res, 403, "FORBIDDEN", "the role " + principal->role + " may not read outbox events");
            return;
        }
        if (!valid_event_id(res, id)) return;
        std::optional<json> event;
        if (!with_database(res, [&](pqxx::connection& conn) { event = EventQuery(conn).get(principal->company_id, id); })) {
            return;
        }
        if (!event) return not_accessible(res);
        res.set_content(event->dump(), kJson);
    }

    void retry_event(const httplib::Request& req, httplib::Response& res, std::string id) {
        const auto principal = authenticate(req, res);
        if (!principal) return;
        if (principal->role != "ADMIN") {
            send_error(res, 403, "FORBIDDEN", "only the ADMIN role may retry events");
            return;
        }
        RetryRequest request;
        request.event_id = std::move(id);
        request.idempotency_key = req.get_header_value("Idempotency-Key");
        request.actor = principal->subject;
        request.company_id = principal->company_id;
        request.channel = "api";
        if (request.idempotency_key.empty()) {
            send_error(res, 400, "MISSING_IDEMPOTENCY_KEY", "the Idempotency-Key header is required");
            return;
        }
        const json body = json::parse(req.body, nullptr, false);
        if (body.is_discarded()) {
            send_error(res, 400, "MALFORMED_JSON", "the request body is not valid JSON");
            return;
        }
        if (!body.is_object()) {
            send_error(res, 400, "INVALID_BODY", R"(the body must be a JSON object {"expected_version": N, "reason": "..."})");
            return;
        }
        const auto version = body.find("expected_version");
        if (version == body.end() || !version->is_number_integer()) {
            send_error(res, 400, "INVALID_EXPECTED_VERSION",
                       "expected_version must be the event's current version, a positive integer");
            return;
        }
        request.expected_version = version->get<long long>();
        const auto reason = body.find("reason");
        if (reason == body.end() || !reason->is_string()) {
            send_error(res, 422, "INVALID_REASON", "reason must be a string of 10 to 300 characters");
            return;
        }
        request.reason = reason->get<std::string>();

        RetryResult result;
        if (!with_database(res, [&](pqxx::connection& conn) { result = RetryService(conn).retry(request); })) return;
        if (const auto* accepted = std::get_if<RetryAccepted>(&result)) {
            if (accepted->replayed) {
                res.set_header("Idempotent-Replayed", "true");
            } else {
                log::info("manual retry accepted: event is PENDING at version " + std::to_string(accepted->version),
                          {.event_id = accepted->event_id});
            }
            res.status = 202;
            res.set_content(
                json{{"event_id", accepted->event_id}, {"status", "PENDING"}, {"version", accepted->version}}.dump(),
                kJson);
        } else if (const auto* conflict = std::get_if<RetryConflict>(&result)) {
            send_error(res, 409, conflict->code, conflict->message,
                       {{"current_version", conflict->current_version}, {"current_status", conflict->current_status}});
        } else {
            const auto& rejected = std::get<RetryRejected>(result);
            switch (rejected.kind) {
                case RetryRejected::Kind::BadRequest: send_error(res, 400, rejected.code, rejected.message); break;
                case RetryRejected::Kind::Unprocessable: send_error(res, 422, rejected.code, rejected.message); break;
                case RetryRejected::Kind::NotVisible: not_accessible(res); break;
            }
        }
    }

    [[nodiscard]] std::shared_ptr<const dispatch::HandlerSet> handlers() const {
        auto current = handler_source ? handler_source() : nullptr;
        return current ? current : std::make_shared<const dispatch::HandlerSet>();
    }

    AdminOptions options;
    const metrics::Metrics& metrics;
    HandlerSource handler_source;
    JwtVerifier verifier;
    db::ConnectionPool pool;
    std::vector<Route> routes;
    httplib::Server server;
    std::thread thread;
    int port = 0;
    bool started = false;
};

AdminServer::AdminServer(AdminOptions options, const metrics::Metrics& metrics, HandlerSource handlers)
    : impl_(std::make_unique<Impl>(std::move(options), metrics, std::move(handlers))) {}

AdminServer::AdminServer(AdminOptions options, const metrics::Metrics& metrics,
                         std::shared_ptr<const dispatch::HandlerSet> handlers)
    : AdminServer(std::move(options), metrics, HandlerSource([handlers] { return handlers; })) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::start() {
    Impl& s = *impl_;
    if (s.started) return;
    s.configure();
    errno = 0;
    const ListenAddress& address = s.options.listen;
    int port = -1;
    if (address.port == 0) {
        port = s.server.bind_to_any_port(address.host);
    } else if (s.server.bind_to_port(address.host, address.port)) {
        port = address.port;
    }
    if (port <= 0) {
        const int error = errno;
        throw AdminStartError("cannot listen on " + display(address) + (error != 0 ? ": " + std::string(std::strerror(error)) : "") +
                              " (admin.listen / OUTBOX_ADMIN_LISTEN; \"off\" disables the listener)");
    }
    s.port = port;
    s.started = true;
    s.thread = std::thread([&s] { s.server.listen_after_bind(); });
    // stop() is a no-op until the accept loop runs; wait for it so start/stop cannot race.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{5};
    while (!s.server.is_running() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    log::info("admin API, /metrics, /healthz and /readyz listening on " + display({address.host, port}));
}

void AdminServer::stop() {
    Impl& s = *impl_;
    if (!s.started) return;
    s.started = false;
    s.server.stop();
    if (s.thread.joinable()) s.thread.join();
}

int AdminServer::port() const noexcept { return impl_->port; }

}  // namespace outbox::admin
