#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "admin/jwt_verifier.hpp"
#include "config/config.hpp"
#include "metrics/metrics.hpp"
#include "routing/handler_set.hpp"

namespace outbox::admin {

using ListenAddress = config::ListenAddress;  // parsed once, by the configuration

/// The admin listener could not start (the address is named in what()).
class AdminStartError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct AdminOptions {
    ListenAddress listen{"127.0.0.1", 8080};
    std::string database_url;
    JwtOptions jwt;
    std::string host_id;
    bool processing_enabled = true;            // readyz needs a handler only when processing
    int threads = 8;                                // API request workers (idle connections hold none)
    int db_connections = 4;                         // admin.db_connections: requests that need the database share these
    int db_connections_per_company = 2;             // admin.db_connections_per_company: more at once answer 503 BUSY
    std::size_t max_body_bytes = 16 * 1024;         // larger bodies get 413
    std::chrono::seconds io_timeout{5};             // writing an answer
    std::chrono::milliseconds request_timeout{10000};  // admin.request_timeout: a whole request must arrive within this
    int max_connections_per_client = 32;            // admin.max_connections_per_client
    int max_connections = 512;                      // admin.max_connections
    std::chrono::seconds keep_alive_timeout{2};     // an idle keep-alive connection is closed after this
    std::chrono::milliseconds probe_timeout{2000};  // statement_timeout of /metrics and /readyz queries
    std::chrono::milliseconds statement_timeout{5000};  // session statement_timeout of every admin connection
    int probe_connections = 2;                      // /readyz and /metrics use these, never the API's
    std::chrono::milliseconds metrics_cache{5000};  // admin.metrics_cache: /metrics gauges reused this long
    std::vector<std::string> platform_roles{"PLATFORM_ADMIN"};  // admin.platform_roles
    bool console = true;                            // admin.console: serve /console/
    std::string console_token_header;               // admin.console_token_header; empty: none

    /// From the configuration. Reads admin.jwt_public_key_file; throws config::ConfigError
    /// when it cannot be read or is not a PEM public key.
    static AdminOptions from(const config::Config& config, const std::string& host_id);
};

/// The host's HTTP listener: the admin API (JWT, company-scoped), /metrics, /healthz and
/// /readyz. Requests are read within the transport's limits (see http_transport.hpp) before
/// authentication; API requests run on a fixed pool of `threads` with a bounded queue (503
/// BUSY beyond it), probes on their own executor; every 4xx/5xx answers
/// {"error": {"code", "message"}}. Start in-process in tests with port 0.
class AdminServer {
public:
    /// Returns the handlers the host routes to right now (they can be replaced at run time);
    /// read by /readyz and /metrics at each request. Must be thread-safe.
    using HandlerSource = std::function<std::shared_ptr<const routing::HandlerSet>()>;

    AdminServer(AdminOptions options, metrics::Metrics& metrics, HandlerSource handlers);
    /// With a fixed handler set (null: none).
    AdminServer(AdminOptions options, metrics::Metrics& metrics,
                std::shared_ptr<const routing::HandlerSet> handlers);
    ~AdminServer();
    AdminServer(const AdminServer&) = delete;
    AdminServer& operator=(const AdminServer&) = delete;

    /// Binds and starts serving on a background thread. Throws AdminStartError naming the
    /// address when it cannot bind.
    void start();
    /// Stops accepting, finishes running requests, joins. Idempotent.
    void stop();
    /// The bound port (useful with port 0); 0 before start().
    [[nodiscard]] int port() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace outbox::admin
