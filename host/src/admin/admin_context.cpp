#include "admin/admin_context.hpp"

#include <algorithm>
#include <vector>

#include "db/connect.hpp"

namespace outbox::admin {
namespace {

constexpr int kConnectTimeoutSeconds = 2;

// A dead or black-holed database must not hold a request thread for libpq's default
// (unbounded) connect time, and no admin statement (the fleet read included) may run
// longer than the statement timeout: both are set for the whole session at connect time.
// A URL's own connect_timeout, or its own statement_timeout in `options`, wins.
// Behind a transaction-mode pooler there is no session to set it for (and PgBouncer 1.18
// refuses the `options` startup parameter): the long admin reads and actions set their own
// SET LOCAL statement_timeout; the rest run under the server's default.
std::string admin_connection_url(const std::string& url, std::chrono::milliseconds statement_timeout) {
    std::vector<std::string> server_settings;
    if (!db::connection_settings().transaction_pooled) {
        server_settings.push_back("statement_timeout=" + std::to_string(statement_timeout.count()));
    }
    return db::conninfo_with(url, {{"connect_timeout", std::to_string(kConnectTimeoutSeconds)}}, server_settings);
}

}  // namespace

AdminContext::AdminContext(AdminOptions options, metrics::Metrics& metrics, AdminServer::HandlerSource handlers)
    : options_(std::move(options)), metrics_(metrics), handler_source_(std::move(handlers)), auth_(options_.jwt, options_.platform_roles),
      slots_(std::max(1, options_.db_connections_per_company)),
      pool_(admin_connection_url(options_.database_url, options_.statement_timeout), options_.db_connections),
      probe_pool_(admin_connection_url(options_.database_url, options_.statement_timeout),
                  std::max(1, options_.probe_connections)) {}

void AdminContext::send_company_busy(HttpResponse& res) const {
    send_error(res, 503, "BUSY",
               std::to_string(slots_.per_company()) +
                   " admin requests of your company (or of the platform roles, which share one cap) already use the "
                   "database (admin.db_connections_per_company); try again when one has finished");
}

std::shared_ptr<const routing::HandlerSet> AdminContext::handlers() const {
    // One empty set, so "no handlers" is the same set from call to call (the /metrics cache
    // recomputes when the set changes).
    static const auto kNone = std::make_shared<const routing::HandlerSet>();
    auto current = handler_source_ ? handler_source_() : nullptr;
    return current ? current : kNone;
}

}  // namespace outbox::admin
