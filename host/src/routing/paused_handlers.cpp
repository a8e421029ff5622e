#include "routing/paused_handlers.hpp"

#include <pqxx/pqxx>

namespace outbox::routing {

std::vector<PausedHandler> read_paused_handlers(pqxx::connection& conn) {
    pqxx::read_transaction tx(conn);
    std::vector<PausedHandler> out;
    for (const auto& row : tx.exec("SELECT handler_name, to_char(paused_at AT TIME ZONE 'UTC', "
                                   "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), paused_by FROM outbox_handler_pause "
                                   "ORDER BY handler_name")) {
        out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>()});
    }
    return out;
}

void PausedHandlers::set(std::set<std::string> names) {
    {
        std::lock_guard lock(mutex_);
        names_.swap(names);
    }
    loaded_ = true;
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
