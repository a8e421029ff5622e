#include "operations/handler_pause.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "routing/paused_handlers.hpp"

namespace outbox::operations {
namespace {

// An operator's pause of a handler an open circuit breaker paused takes the pause over: it
// becomes the operator's (the breaker no longer probes or resumes it). Any other pause is
// left as it is.
constexpr const char* kPauseSql = R"SQL(
INSERT INTO outbox_handler_pause (handler_name, paused_by) VALUES ($1, $2)
ON CONFLICT (handler_name) DO UPDATE
    SET paused_by = EXCLUDED.paused_by, paused_at = now(),
        probe_after = NULL, probe_owner = NULL, probe_token = NULL, probe_expires_at = NULL
    WHERE outbox_handler_pause.paused_by = 'circuit-breaker' AND EXCLUDED.paused_by <> 'circuit-breaker'
RETURNING 1
)SQL";

constexpr const char* kResumeSql = "DELETE FROM outbox_handler_pause WHERE handler_name = $1 RETURNING 1";

constexpr const char* kAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, target_id, detail) VALUES ($1, $2, $3, $4::jsonb)
)SQL";

}  // namespace

bool set_handler_paused(pqxx::connection& conn, const std::string& handler, bool paused, const std::string& actor,
                        const std::string& channel) {
    // A token's sub may be any text: one that reads "circuit-breaker" must not make an
    // operator's pause look like the breaker's, which the breaker would resume.
    const std::string who = actor == routing::kCircuitBreakerActor ? "operator:" + actor : actor;
    pqxx::work tx(conn);
    tx.exec("SET LOCAL lock_timeout = '5s'");
    const bool changed =
        !(paused ? tx.exec_params(kPauseSql, handler, who) : tx.exec_params(kResumeSql, handler)).empty();
    if (changed) {
        tx.exec_params0(kAuditSql, who, paused ? "outbox.handler_paused" : "outbox.handler_resumed", handler,
                        nlohmann::json{{"channel", channel}}.dump());
    }
    // Every host re-reads the paused set on this (delivered on commit), and wakes up to
    // claim again on a resume.
    tx.exec_params("SELECT pg_notify($1, $2)", routing::kHandlerNotifyChannel, handler);
    tx.commit();
    return changed;
}

}  // namespace outbox::operations
