#include "dispatch/handler_pause.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace outbox::dispatch {
namespace {

constexpr const char* kPauseSql = R"SQL(
INSERT INTO outbox_handler_pause (handler_name, paused_by) VALUES ($1, $2)
ON CONFLICT (handler_name) DO NOTHING
RETURNING 1
)SQL";

constexpr const char* kResumeSql = "DELETE FROM outbox_handler_pause WHERE handler_name = $1 RETURNING 1";

constexpr const char* kAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, target_id, detail) VALUES ($1, $2, $3, $4::jsonb)
)SQL";

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool valid_handler_name(std::string_view name) {
    if (name.empty() || name.size() > 100 || !is_lower_alnum(name.front())) return false;
    return std::all_of(name.begin(), name.end(),
                       [](char c) { return is_lower_alnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool set_handler_paused(pqxx::connection& conn, const std::string& handler, bool paused, const std::string& actor,
                        const std::string& channel) {
    pqxx::work tx(conn);
    tx.exec("SET LOCAL lock_timeout = '5s'");
    const bool changed =
        !(paused ? tx.exec_params(kPauseSql, handler, actor) : tx.exec_params(kResumeSql, handler)).empty();
    if (changed) {
        tx.exec_params0(kAuditSql, actor, paused ? "outbox.handler_paused" : "outbox.handler_resumed", handler,
                        nlohmann::json{{"channel", channel}}.dump());
    }
    // Every host re-reads the paused set on this (delivered on commit), and wakes up to
    // claim again on a resume.
    tx.exec_params("SELECT pg_notify($1, $2)", kHandlerNotifyChannel, handler);
    tx.commit();
    return changed;
}

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

}  // namespace outbox::dispatch
