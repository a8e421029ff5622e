#include "routing/paused_handlers.hpp"

#include <pqxx/pqxx>

namespace outbox::routing {
namespace {

constexpr const char* kReadSql = R"SQL(
SELECT handler_name, to_char(paused_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), paused_by,
       CASE WHEN paused_by = 'circuit-breaker' THEN
           coalesce(to_char(greatest(probe_after, probe_expires_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), '')
       ELSE '' END,
       CASE WHEN paused_by = 'circuit-breaker' AND probe_expires_at > now() THEN coalesce(probe_owner, '') ELSE '' END
FROM outbox_handler_pause
ORDER BY handler_name
)SQL";

}  // namespace

std::vector<PausedHandler> read_paused_handlers(pqxx::connection& conn) {
    pqxx::read_transaction tx(conn);
    std::vector<PausedHandler> out;
    for (const auto& row : tx.exec(kReadSql)) {
        out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                       row[3].as<std::string>(), row[4].as<std::string>()});
    }
    return out;
}

void PausedHandlers::set(std::set<std::string> names, std::set<std::string> by_breaker) {
    {
        std::lock_guard lock(mutex_);
        names_.swap(names);
        by_breaker_.swap(by_breaker);
    }
    loaded_ = true;
}

void PausedHandlers::add_by_breaker(const std::string& name) {
    std::lock_guard lock(mutex_);
    names_.insert(name);
    by_breaker_.insert(name);
}

std::set<std::string> PausedHandlers::by_breaker() const {
    std::lock_guard lock(mutex_);
    return by_breaker_;
}

bool PausedHandlers::contains(const std::string& name) const {
    std::lock_guard lock(mutex_);
    return names_.contains(name);
}

std::set<std::string> PausedHandlers::get() const {
    std::lock_guard lock(mutex_);
    return names_;
}

}  // namespace outbox::routing
