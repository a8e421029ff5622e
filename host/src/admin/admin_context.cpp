#include "admin/admin_context.hpp"

#include <algorithm>
#include <vector>

namespace outbox::admin {
namespace {

constexpr int kConnectTimeoutSeconds = 2;

// A dead or black-holed database must not hold a request thread for libpq's default
// (unbounded) connect time, and no admin statement (the fleet read included) may run
// longer than the statement timeout: both are set for the whole session at connect time.
// (A URL that sets its own `options` keeps them; the queries' own SET LOCAL limits remain.)
std::string admin_connection_url(const std::string& url, std::chrono::milliseconds statement_timeout) {
    const bool uri = url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0;
    std::vector<std::string> params;
    if (url.find("connect_timeout") == std::string::npos) {
        params.push_back("connect_timeout=" + std::to_string(kConnectTimeoutSeconds));
    }
    if (url.find("options") == std::string::npos) {
        const std::string ms = std::to_string(statement_timeout.count());
        params.push_back(uri ? "options=-c%20statement_timeout%3D" + ms : "options='-c statement_timeout=" + ms + "'");
    }
    std::string out = url;
    for (const auto& param : params) {
        if (uri) {
            out += (out.find('?') == std::string::npos ? "?" : "&") + param;
        } else {
            out += (out.empty() ? "" : " ") + param;
        }
    }
    return out;
}

}  // namespace

AdminContext::AdminContext(AdminOptions options, metrics::Metrics& metrics, AdminServer::HandlerSource handlers)
    : options_(std::move(options)), metrics_(metrics), handler_source_(std::move(handlers)), auth_(options_.jwt, options_.platform_roles),
      pool_(admin_connection_url(options_.database_url, options_.statement_timeout), options_.db_connections),
      probe_pool_(admin_connection_url(options_.database_url, options_.statement_timeout),
                  std::max(1, options_.probe_connections)) {}

std::shared_ptr<const dispatch::HandlerSet> AdminContext::handlers() const {
    auto current = handler_source_ ? handler_source_() : nullptr;
    return current ? current : std::make_shared<const dispatch::HandlerSet>();
}

}  // namespace outbox::admin
