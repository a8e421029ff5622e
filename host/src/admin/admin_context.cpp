#include "admin/admin_context.hpp"

namespace outbox::admin {
namespace {

constexpr int kConnectTimeoutSeconds = 2;

// A dead or black-holed database must not hold a request thread for libpq's default
// (unbounded) connect time.
std::string with_connect_timeout(const std::string& url) {
    if (url.find("connect_timeout") != std::string::npos) return url;
    const std::string param = "connect_timeout=" + std::to_string(kConnectTimeoutSeconds);
    if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0) {
        return url + (url.find('?') == std::string::npos ? "?" : "&") + param;
    }
    return url.empty() ? param : url + " " + param;
}

}  // namespace

AdminContext::AdminContext(AdminOptions options, const metrics::Metrics& metrics, AdminServer::HandlerSource handlers)
    : options_(std::move(options)), metrics_(metrics), handler_source_(std::move(handlers)), auth_(options_.jwt),
      pool_(with_connect_timeout(options_.database_url), options_.db_connections) {}

std::shared_ptr<const dispatch::HandlerSet> AdminContext::handlers() const {
    auto current = handler_source_ ? handler_source_() : nullptr;
    return current ? current : std::make_shared<const dispatch::HandlerSet>();
}

}  // namespace outbox::admin
