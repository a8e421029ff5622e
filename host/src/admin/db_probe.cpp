#include "admin/db_probe.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "db/pg_array.hpp"

namespace outbox::admin {
namespace {

// Each count names one status so it matches a partial index predicate (due, lease, review);
// `status <> 'COMPLETED'` would match none and read every COMPLETED row. Unfinished means
// PENDING, RETRY_WAIT (due or not: a retry waiting for its backoff is still late) and
// PROCESSING; REVIEW_REQUIRED waits for a person and has its own gauge. Blocked: waiting
// events held back by an unfinished or reviewed earlier event of their aggregate, both
// sides read from the aggregate index (unfinished keyed events only).
constexpr const char* kGaugesSql = R"SQL(
WITH live AS MATERIALIZED (
    SELECT event_id, event_type, occurred_at FROM event_publication
    WHERE status IN ('PENDING', 'RETRY_WAIT') OR status = 'PROCESSING'
), handler_types AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS h(handler, event_type)
)
SELECT
    (SELECT count(*) FROM event_publication WHERE status = 'PENDING'),
    (SELECT count(*) FROM event_publication WHERE status = 'RETRY_WAIT'),
    (SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'),
    (SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'),
    (SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::float8 FROM live),
    (SELECT coalesce(json_object_agg(handler, delay), '{}')::text FROM (
        SELECT h.handler, extract(epoch FROM now() - min(l.occurred_at))::float8 AS delay
        FROM handler_types h JOIN live l ON l.event_type = h.event_type
        WHERE NOT EXISTS (SELECT 1 FROM event_consumption c
                          WHERE c.event_id = l.event_id AND c.handler_name = h.handler)
        GROUP BY h.handler) d),
    (SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::float8 FROM event_publication
     WHERE status = 'REVIEW_REQUIRED'),
    (SELECT count(*) FROM event_publication w
     WHERE w.aggregate_seq IS NOT NULL AND w.status IN ('PENDING', 'RETRY_WAIT')
       AND EXISTS (SELECT 1 FROM event_publication earlier
                   WHERE earlier.company_id = w.company_id AND earlier.aggregate_key = w.aggregate_key
                     AND earlier.aggregate_seq < w.aggregate_seq AND earlier.aggregate_seq IS NOT NULL
                     AND earlier.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')))
)SQL";

void limit_statement(pqxx::transaction_base& tx, std::chrono::milliseconds timeout) {
    tx.exec("SET LOCAL statement_timeout = " + std::to_string(timeout.count()));
}

}  // namespace

metrics::DbGauges read_db_gauges(pqxx::connection& conn, const dispatch::HandlerSet& handlers,
                                 std::chrono::milliseconds timeout) {
    std::vector<std::string> names;
    std::vector<std::string> types;
    for (const auto& entry : handlers.entries()) {
        for (const auto& type : entry.event_types) {
            names.push_back(entry.name);
            types.push_back(type);
        }
    }
    pqxx::read_transaction tx(conn);
    limit_statement(tx, timeout);
    const pqxx::row row = tx.exec_params1(kGaugesSql, db::pg_array(names), db::pg_array(types));
    const pqxx::result paused = tx.exec("SELECT handler_name FROM outbox_handler_pause");
    tx.commit();

    metrics::DbGauges gauges;
    // This host's handlers (0 or 1) and every handler paused fleet-wide (1).
    for (const auto& entry : handlers.entries()) gauges.handler_paused[entry.name] = false;
    for (const auto& p : paused) gauges.handler_paused[p[0].as<std::string>()] = true;
    gauges.backlog["PENDING"] = row[0].as<long long>();
    gauges.backlog["RETRY_WAIT"] = row[1].as<long long>();
    gauges.backlog["PROCESSING"] = row[2].as<long long>();
    gauges.backlog["REVIEW_REQUIRED"] = row[3].as<long long>();
    gauges.oldest_delay_seconds = row[4].as<double>();
    for (const auto& entry : handlers.entries()) gauges.handler_oldest_delay_seconds[entry.name] = 0;
    const auto per_handler = nlohmann::json::parse(row[5].c_str());
    for (const auto& [handler, delay] : per_handler.items()) {
        gauges.handler_oldest_delay_seconds[handler] = delay.get<double>();
    }
    gauges.oldest_review_seconds = row[6].as<double>();
    gauges.blocked = row[7].as<long long>();
    return gauges;
}

void ping_database(pqxx::connection& conn, std::chrono::milliseconds timeout) {
    pqxx::read_transaction tx(conn);
    limit_statement(tx, timeout);
    tx.exec1("SELECT 1");
    tx.commit();
}

}  // namespace outbox::admin
