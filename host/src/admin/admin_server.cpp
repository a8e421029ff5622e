// Composition of the admin listener: options from the configuration (including the
// RS256 key file), the shared context, the router with every endpoint group, the transport.
#include "admin/admin_server.hpp"

#include <fstream>
#include <sstream>

#include "admin/admin_context.hpp"
#include "admin/endpoints.hpp"
#include "admin/http_transport.hpp"
#include "admin/router.hpp"
#include "log/log.hpp"

namespace outbox::admin {

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
    o.request_timeout = config.admin.request_timeout;
    o.metrics_cache = config.admin.metrics_cache;
    o.platform_roles = config.admin.platform_roles;
    o.max_connections_per_client = config.admin.max_connections_per_client;
    o.max_connections = config.admin.max_connections;
    o.db_connections = config.admin.db_connections;
    o.db_connections_per_company = config.admin.db_connections_per_company;
    o.console = config.admin.console;
    o.console_token_header = config.admin.console_token_header;
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

namespace {

TransportOptions transport_options(const AdminOptions& o, metrics::Metrics& metrics) {
    TransportOptions t;
    t.on_refused = [&metrics] { metrics.admin_connections_refused(1); };
    t.threads = o.threads;
    t.max_queued = static_cast<std::size_t>(std::max(1, o.threads)) * 4;
    t.max_body_bytes = o.max_body_bytes;
    t.request_timeout = o.request_timeout;
    t.io_timeout = o.io_timeout;
    t.keep_alive_timeout = o.keep_alive_timeout;
    t.max_connections_per_client = o.max_connections_per_client;
    t.max_connections = o.max_connections;
    return t;
}

}  // namespace

struct AdminServer::Impl {
    Impl(AdminOptions o, metrics::Metrics& m, HandlerSource h)
        : context(std::move(o), m, std::move(h)),
          transport(transport_options(context.options(), m), router) {
        add_probe_endpoints(router, context);
        add_event_read_endpoints(router, context);
        add_retry_endpoints(router, context);
        add_operator_endpoints(router, context);
        add_discard_endpoints(router, context);
        add_operation_endpoints(router, context);
        add_fleet_endpoints(router, context);
        add_identity_endpoints(router, context);
        add_overview_endpoints(router, context);
        add_history_endpoints(router, context);
        if (context.options().console) add_console_endpoints(router, context);
    }

    AdminContext context;
    Router router;
    HttpTransport transport;
    int port = 0;
    bool started = false;
};

AdminServer::AdminServer(AdminOptions options, metrics::Metrics& metrics, HandlerSource handlers)
    : impl_(std::make_unique<Impl>(std::move(options), metrics, std::move(handlers))) {}

AdminServer::AdminServer(AdminOptions options, metrics::Metrics& metrics,
                         std::shared_ptr<const routing::HandlerSet> handlers)
    : AdminServer(std::move(options), metrics, HandlerSource([handlers] { return handlers; })) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::start() {
    Impl& s = *impl_;
    if (s.started) return;
    const ListenAddress& address = s.context.options().listen;
    s.port = s.transport.bind(address);
    s.started = true;
    s.transport.serve();
    log::info("admin API, /metrics, /healthz and /readyz listening on " + display({address.host, s.port}));
}

void AdminServer::stop() {
    Impl& s = *impl_;
    if (!s.started) return;
    s.started = false;
    s.transport.stop();
}

int AdminServer::port() const noexcept { return impl_->port; }

}  // namespace outbox::admin
