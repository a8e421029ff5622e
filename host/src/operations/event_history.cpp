#include "operations/event_history.hpp"

#include <algorithm>
#include <set>

#include <pqxx/pqxx>

#include "db/event_sql.hpp"
#include "fleet/fleet_registry.hpp"

namespace outbox::operations {
namespace {

using nlohmann::json;

// Both action tables are append-only and keyed by event; the channel (api or cli) and the
// bulk request are recorded only in the action's audit row (V15's audit_event_target_idx).
// A CLI actor is "cli:<OS user>", a platform account: the company sees "operator".
constexpr const char* kActionsSql = R"SQL(
SELECT kind, CASE WHEN channel = 'cli' OR (channel IS NULL AND actor LIKE 'cli:%') THEN 'operator' ELSE actor END,
       reason, to_char(at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), channel, previous_version, new_version,
       previous_attempt_count, bulk_retry_id
FROM (
    SELECT 'retry' AS kind, r.actor, r.reason, r.created_at AS at, a.detail ->> 'channel' AS channel,
           r.previous_version, r.new_version, r.previous_attempt_count,
           (a.detail ->> 'bulk_retry_id')::bigint AS bulk_retry_id, r.id
    FROM outbox_manual_retry r
    LEFT JOIN LATERAL (SELECT detail FROM audit_event
                       WHERE target_id = r.event_id::text AND action = 'outbox.manual_retry'
                         AND company_id = r.company_id AND detail ->> 'manual_retry_id' = r.id::text
                       LIMIT 1) a ON true
    WHERE r.event_id = $1::uuid AND r.company_id = $2
    UNION ALL
    SELECT 'discard', d.actor, d.reason, d.created_at, a.detail ->> 'channel',
           d.previous_version, d.new_version, d.previous_attempt_count, NULL::bigint, d.id
    FROM outbox_discard d
    LEFT JOIN LATERAL (SELECT detail FROM audit_event
                       WHERE target_id = d.event_id::text AND action = 'outbox.discard'
                         AND company_id = d.company_id AND detail ->> 'discard_id' = d.id::text
                       LIMIT 1) a ON true
    WHERE d.event_id = $1::uuid AND d.company_id = $2
) actions
ORDER BY at, kind, id
)SQL";

// The handlers of `event_type` that this host or any live host runs. A COMPLETED event
// was consumed by every handler of the host that completed it; when that completion left
// no event_consumption row (done in one attempt), this is the best account of who did.
std::set<std::string> handlers_of(const std::string& event_type, const routing::HandlerSet& local,
                                  const fleet::FleetView& fleet) {
    std::set<std::string> names;
    for (const auto& entry : local.entries()) {
        if (std::find(entry.event_types.begin(), entry.event_types.end(), event_type) != entry.event_types.end()) {
            names.insert(entry.name);
        }
    }
    for (const auto& host : fleet.hosts) {
        if (!host.live) continue;
        for (const auto& handler : host.handlers) {
            if (std::find(handler.event_types.begin(), handler.event_types.end(), event_type) !=
                handler.event_types.end()) {
                names.insert(handler.handler);
            }
        }
    }
    return names;
}

json optional_text(const pqxx::field& field) { return field.is_null() ? json(nullptr) : json(field.c_str()); }

}  // namespace

std::optional<json> read_event_history(pqxx::connection& conn, const routing::HandlerSet& local,
                                       const std::string& id, const std::string& company_id) {
    pqxx::read_transaction tx(conn);
    tx.exec("SET LOCAL statement_timeout = '5s'");
    tx.exec("SET LOCAL TIME ZONE 'UTC'");
    const pqxx::result event = tx.exec_params(db::event_sql::kHistoryEvent, id, company_id);
    if (event.empty()) return std::nullopt;
    json consumed = json::array();
    std::set<std::string> recorded;
    for (const auto& row : tx.exec_params(db::event_sql::kHistoryConsumed, id)) {
        recorded.insert(row[0].c_str());
        consumed.push_back({{"handler", row[0].c_str()}, {"consumed_at", row[1].c_str()}, {"recorded", true}});
    }
    json actions = json::array();
    for (const auto& row : tx.exec_params(kActionsSql, id, company_id)) {
        json action{{"action", row[0].c_str()}, {"actor", row[1].c_str()}, {"reason", row[2].c_str()},
                    {"at", row[3].c_str()},     {"channel", optional_text(row[4])}};
        action["from_version"] = row[5].as<long long>();
        action["to_version"] = row[6].as<long long>();
        action["previous_attempt_count"] = row[7].as<long long>();
        if (!row[8].is_null()) action["bulk_retry_id"] = row[8].as<long long>();
        actions.push_back(std::move(action));
    }
    const std::string status = event[0][0].c_str();
    const std::string event_type = event[0][1].c_str();
    const std::string completed_at = event[0][2].is_null() ? "" : event[0][2].c_str();
    tx.commit();
    if (status == "COMPLETED") {
        // Handlers that completed it without leaving a row: recorded false.
        const fleet::FleetView fleet = fleet::read_fleet(conn);
        for (const auto& name : handlers_of(event_type, local, fleet)) {
            if (recorded.count(name) != 0) continue;
            consumed.push_back({{"handler", name}, {"consumed_at", completed_at}, {"recorded", false}});
        }
    }
    return json{{"event_id", id}, {"status", status}, {"consumed_by", std::move(consumed)}, {"actions", std::move(actions)}};
}

}  // namespace outbox::operations
