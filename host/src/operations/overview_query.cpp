#include "operations/overview_query.hpp"

#include <array>
#include <map>
#include <set>
#include <vector>

#include <pqxx/pqxx>

#include "core/event_status.hpp"
#include "fleet/fleet_registry.hpp"
#include "operations/backlog_query.hpp"

namespace outbox::operations {
namespace {

using nlohmann::json;

// One bound for every statement of these reads; the session's statement timeout (admin
// pool) stays the outer limit.
void prepare(pqxx::transaction_base& tx) {
    tx.exec("SET LOCAL statement_timeout = '5s'");
    tx.exec("SET LOCAL TIME ZONE 'UTC'");
}

constexpr const char* kNowSql = R"SQL(SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))SQL";

// Counts per (event type, status) of one company: the unfinished statuses from the claim's
// partial indexes (as large as the backlog), the finished ones from the company's rows
// (about 350 ms for a million; the overview cache bounds how often).
constexpr const char* kByTypeSql = R"SQL(
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status IN ('COMPLETED', 'DISCARDED') GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status IN ('PENDING', 'RETRY_WAIT') GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status = 'PROCESSING' GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status = 'REVIEW_REQUIRED' GROUP BY event_type, status
ORDER BY 1, 2
)SQL";

// The last 60 minutes, oldest first, the current (partial) minute last. completed: events
// that completed in the minute. failed: the schema keeps no row per attempt, so this is
// the events now waiting for a retry (RETRY_WAIT) or a person (REVIEW_REQUIRED) whose last
// attempt failed in the minute; an event that failed and was retried again is counted at
// its latest failure only. Each status is read from its own partial index.
constexpr const char* kPerMinuteSql = R"SQL(
WITH minutes AS (
    SELECT m FROM generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()),
                                  interval '1 minute') AS m
), completed AS (
    SELECT date_trunc('minute', completed_at) AS m, count(*) AS n FROM event_publication
    WHERE status = 'COMPLETED' AND company_id = $1 AND completed_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
), failed AS (
    SELECT m, sum(n) AS n FROM (
        SELECT date_trunc('minute', updated_at) AS m, count(*) AS n FROM event_publication
        WHERE status = 'RETRY_WAIT' AND company_id = $1 AND updated_at >= date_trunc('minute', now()) - interval '59 minutes'
        GROUP BY 1
        UNION ALL
        SELECT date_trunc('minute', updated_at), count(*) FROM event_publication
        WHERE status = 'REVIEW_REQUIRED' AND company_id = $1 AND updated_at >= date_trunc('minute', now()) - interval '59 minutes'
        GROUP BY 1) f
    GROUP BY m
)
SELECT to_char(minutes.m, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), coalesce(c.n, 0), coalesce(f.n, 0)
FROM minutes LEFT JOIN completed c ON c.m = minutes.m LEFT JOIN failed f ON f.m = minutes.m
ORDER BY minutes.m
)SQL";

// Read from event_publication_review_idx (company_id, updated_at) WHERE REVIEW_REQUIRED.
constexpr const char* kReviewGroupsSql = R"SQL(
SELECT event_type, last_error_code, count(*),
       to_char(min(occurred_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(max(occurred_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM event_publication WHERE status = 'REVIEW_REQUIRED' AND company_id = $1
GROUP BY event_type, last_error_code
ORDER BY count(*) DESC, event_type, last_error_code NULLS FIRST
)SQL";

// The handlers the fleet knows: this host's and those every live host reports, each with
// the union of the event types any host gives it.
std::vector<HandlerTypes> known_handlers(const routing::HandlerSet& local, const fleet::FleetView& fleet) {
    std::map<std::string, std::set<std::string>> types;
    for (const auto& handler : handler_types_of(local)) types[handler.name].insert(handler.event_types.begin(), handler.event_types.end());
    for (const auto& host : fleet.hosts) {
        if (!host.live) continue;
        for (const auto& handler : host.handlers) {
            types[handler.handler].insert(handler.event_types.begin(), handler.event_types.end());
        }
    }
    std::vector<HandlerTypes> out;
    for (const auto& [name, event_types] : types) out.push_back({name, {event_types.begin(), event_types.end()}});
    return out;
}

}  // namespace

json read_overview(pqxx::connection& conn, const routing::HandlerSet& local, const std::string& company_id) {
    const fleet::FleetView fleet = fleet::read_fleet(conn);
    const auto handlers = known_handlers(local, fleet);
    pqxx::read_transaction tx(conn);
    prepare(tx);
    json counts = json::object();
    for (const std::string_view status : core::kStatusTexts) counts[std::string(status)] = 0;
    json by_type = json::array();
    for (const auto& row : tx.exec_params(kByTypeSql, company_id)) {
        const auto count = row[2].as<long long>();
        by_type.push_back({{"event_type", row[0].c_str()}, {"status", row[1].c_str()}, {"count", count}});
        counts[row[1].c_str()] = counts.value(row[1].c_str(), 0LL) + count;
    }
    json oldest = json::array();
    for (const auto& [handler, seconds] : read_handler_oldest_delays(tx, handlers, company_id)) {
        oldest.push_back({{"handler", handler}, {"oldest_seconds", seconds}});
    }
    json per_minute = json::array();
    for (const auto& row : tx.exec_params(kPerMinuteSql, company_id)) {
        per_minute.push_back(
            {{"minute", row[0].c_str()}, {"completed", row[1].as<long long>()}, {"failed", row[2].as<long long>()}});
    }
    std::vector<std::string> handled_types;
    for (const auto& handler : handlers) {
        handled_types.insert(handled_types.end(), handler.event_types.begin(), handler.event_types.end());
    }
    json blocking_heads = json::array();
    for (const auto& head : read_unhandled_blocking_heads(tx, handled_types, company_id)) {
        blocking_heads.push_back({{"event_id", head.event_id},
                                  {"event_type", head.event_type},
                                  {"status", head.status},
                                  {"successors", head.successors}});
    }
    const std::string generated_at = tx.exec1(kNowSql)[0].c_str();
    tx.commit();
    return json{{"generated_at", generated_at},
                {"counts", std::move(counts)},
                {"by_event_type", std::move(by_type)},
                {"oldest_unfinished", std::move(oldest)},
                {"per_minute", std::move(per_minute)},
                {"blocking_heads", std::move(blocking_heads)}};
}

json read_review_groups(pqxx::connection& conn, const std::string& company_id) {
    json groups = json::array();
    pqxx::read_transaction tx(conn);
    prepare(tx);
    for (const auto& row : tx.exec_params(kReviewGroupsSql, company_id)) {
        groups.push_back({{"event_type", row[0].c_str()},
                          {"last_error_code", row[1].is_null() ? json(nullptr) : json(row[1].c_str())},
                          {"count", row[2].as<long long>()},
                          {"oldest", row[3].c_str()},
                          {"newest", row[4].c_str()}});
    }
    tx.commit();
    return json{{"groups", std::move(groups)}};
}

}  // namespace outbox::operations
