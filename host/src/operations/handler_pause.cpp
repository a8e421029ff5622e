#include "operations/handler_pause.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "routing/paused_handlers.hpp"

namespace outbox::operations {
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

}  // namespace

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
    tx.exec_params("SELECT pg_notify($1, $2)", routing::kHandlerNotifyChannel, handler);
    tx.commit();
    return changed;
}

}  // namespace outbox::operations
