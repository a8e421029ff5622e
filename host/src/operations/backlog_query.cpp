#include "operations/backlog_query.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "db/aggregate_order.hpp"
#include "db/pg_array.hpp"

namespace outbox::operations {
namespace {

// Unfinished events (optionally of one company, $3) with the time each became due, and the
// (handler, event type) pairs of $1/$2: the per-handler oldest delay below reads both.
// Shared by /metrics (every company) and the console's overview (one company), so both mean
// the same thing. A delayed event not yet due has a due time ahead: it adds no delay.
const std::string kLiveCtes = R"SQL(
live AS MATERIALIZED (
    SELECT event_id, event_type, )SQL" + db::due_since("event_publication") + R"SQL( AS due_at FROM event_publication
    WHERE (status IN ('PENDING', 'RETRY_WAIT') OR status = 'PROCESSING') AND ($3::text IS NULL OR company_id = $3)
), handler_types AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS h(handler, event_type)
)
)SQL";

// {"<handler>": seconds}: per handler, how long the earliest due live event of a type it
// supports that it has not consumed yet has been due (handlers with none are absent).
constexpr const char* kHandlerDelays = R"SQL(
    (SELECT coalesce(json_object_agg(handler, delay), '{}')::text FROM (
        SELECT h.handler, greatest(extract(epoch FROM now() - min(l.due_at)), 0)::float8 AS delay
        FROM handler_types h JOIN live l ON l.event_type = h.event_type
        WHERE NOT EXISTS (SELECT 1 FROM event_consumption c
                          WHERE c.event_id = l.event_id AND c.handler_name = h.handler)
        GROUP BY h.handler) d)
)SQL";

// Each count names one status so it matches a partial index predicate (due, lease, review);
// `status <> 'COMPLETED'` would match none and read every COMPLETED row. Unfinished means
// PENDING, RETRY_WAIT (due or not: a retry waiting for its backoff is still late) and
// PROCESSING; REVIEW_REQUIRED waits for a person and has its own gauge. Blocked: waiting
// events held back by an unfinished or reviewed earlier event of their aggregate, both
// sides read from the aggregate index (unfinished keyed events only).
const std::string kGaugesSql = "WITH " + kLiveCtes + R"SQL(
SELECT
    (SELECT count(*) FROM event_publication WHERE status = 'PENDING'),
    (SELECT count(*) FROM event_publication WHERE status = 'RETRY_WAIT'),
    (SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'),
    (SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'),
    (SELECT greatest(coalesce(extract(epoch FROM now() - min(due_at)), 0), 0)::float8 FROM live),
)SQL" + kHandlerDelays + R"SQL(,
    (SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::float8 FROM event_publication
     WHERE status = 'REVIEW_REQUIRED'),
    (SELECT count(*) FROM event_publication w
     WHERE w.aggregate_seq IS NOT NULL AND w.status IN ('PENDING', 'RETRY_WAIT')
       AND EXISTS (SELECT 1 FROM event_publication earlier WHERE )SQL" + db::holds_back("earlier", "w") + "))";

const std::string kHandlerDelaysSql = "WITH " + kLiveCtes + " SELECT " + kHandlerDelays;

constexpr const char* kCountsSql = R"SQL(
SELECT status, event_type, count(*) FROM event_publication GROUP BY status, event_type ORDER BY status, event_type
)SQL";

const std::string kOldestSql = "SELECT greatest(coalesce(extract(epoch FROM now() - min(" +
                               db::due_since("event_publication") +
                               ")), 0), 0)::bigint FROM event_publication "
                               "WHERE status IN ('PENDING', 'RETRY_WAIT', 'PROCESSING')";

// Waiting events held back by an earlier unfinished or reviewed event of their aggregate.
std::string held_back(const std::string& later) {
    return "EXISTS (SELECT 1 FROM event_publication earlier WHERE " + db::holds_back("earlier", later) + ")";
}

const std::string kBlockedSql =
    "SELECT count(*) FROM event_publication w WHERE w.aggregate_seq IS NOT NULL "
    "AND w.status IN ('PENDING', 'RETRY_WAIT') AND " + held_back("w");

// A type is reported unhandled when it has due events nobody has ever attempted for over a
// minute while nothing of that type is in flight: no host in the fleet claims it. Events
// blocked behind an earlier one of their aggregate are not counted: they are waiting, not lost.
const std::string kUnhandledSql =
    "SELECT event_type, count(*), extract(epoch FROM now() - min(" + db::due_since("p") + "))::bigint "
    "FROM event_publication p "
    "WHERE status = 'PENDING' AND attempt_count = 0 AND next_attempt_at < now() - interval '1 minute' "
    "AND NOT EXISTS (SELECT 1 FROM event_publication q WHERE q.status = 'PROCESSING' AND q.event_type = p.event_type) "
    "AND NOT (p.aggregate_seq IS NOT NULL AND " + held_back("p") + ") "
    "GROUP BY event_type ORDER BY event_type";

// Heads of their aggregate (nothing holds them back) that hold back waiting events and whose
// type is none of $1: the claim never takes them, so their successors never run.
const std::string kUnhandledHeadsSql =
    "SELECT h.event_id::text, h.company_id, h.event_type, h.status, "
    "(SELECT count(*) FROM event_publication later WHERE later.status IN ('PENDING', 'RETRY_WAIT') AND " +
    db::holds_back("h", "later") + ") AS successors "
    "FROM event_publication h "
    "WHERE h.status IN ('PENDING', 'RETRY_WAIT') AND h.aggregate_seq IS NOT NULL "
    "AND ($2::text IS NULL OR h.company_id = $2) AND h.event_type <> ALL ($1::text[]) "
    "AND NOT EXISTS (SELECT 1 FROM event_publication earlier WHERE " + db::holds_back("earlier", "h") + ") "
    "AND EXISTS (SELECT 1 FROM event_publication later WHERE later.status IN ('PENDING', 'RETRY_WAIT') AND " +
    db::holds_back("h", "later") + ") "
    "ORDER BY successors DESC, h.occurred_at LIMIT 20";

constexpr const char* kReviewSql = R"SQL(
SELECT event_type, coalesce(last_error_code, '-'), count(*) FROM event_publication
WHERE status = 'REVIEW_REQUIRED' GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
)SQL";

struct HandlerTypeArrays {
    std::string names;
    std::string types;
};

// One (handler, event type) pair per element, as the two parallel arrays $1 and $2.
HandlerTypeArrays handler_type_arrays(const std::vector<HandlerTypes>& handlers) {
    std::vector<std::string> names;
    std::vector<std::string> types;
    for (const auto& handler : handlers) {
        for (const auto& type : handler.event_types) {
            names.push_back(handler.name);
            types.push_back(type);
        }
    }
    return {db::pg_array(names), db::pg_array(types)};
}

// Every handler of `handlers` at 0, then the delays the query found.
std::map<std::string, double> handler_delays(const std::vector<HandlerTypes>& handlers, const char* json_text) {
    std::map<std::string, double> delays;
    for (const auto& handler : handlers) delays[handler.name] = 0;
    const auto found = nlohmann::json::parse(json_text);
    for (const auto& [handler, delay] : found.items()) delays[handler] = delay.get<double>();
    return delays;
}

void limit_statement(pqxx::transaction_base& tx, std::chrono::milliseconds timeout) {
    tx.exec("SET LOCAL statement_timeout = " + std::to_string(timeout.count()));
}

}  // namespace

std::vector<HandlerTypes> handler_types_of(const routing::HandlerSet& handlers) {
    std::vector<HandlerTypes> out;
    for (const auto& entry : handlers.entries()) out.push_back({entry.name, entry.event_types});
    return out;
}

std::map<std::string, double> read_handler_oldest_delays(pqxx::transaction_base& tx,
                                                         const std::vector<HandlerTypes>& handlers,
                                                         const std::string& company_id) {
    const auto arrays = handler_type_arrays(handlers);
    const pqxx::row row = tx.exec_params1(kHandlerDelaysSql, arrays.names, arrays.types, company_id);
    return handler_delays(handlers, row[0].c_str());
}

metrics::DbGauges read_db_gauges(pqxx::connection& conn, const routing::HandlerSet& handlers,
                                 std::chrono::milliseconds timeout) {
    const auto handler_types = handler_types_of(handlers);
    const auto arrays = handler_type_arrays(handler_types);
    pqxx::read_transaction tx(conn);
    limit_statement(tx, timeout);
    const pqxx::row row =
        tx.exec_params1(kGaugesSql, arrays.names, arrays.types, std::optional<std::string>{});
    const pqxx::result paused = tx.exec("SELECT handler_name FROM outbox_handler_pause");
    const pqxx::result slots = tx.exec(
        "SELECT handler_name, count(*) FILTER (WHERE token IS NOT NULL AND expires_at > clock_timestamp()) "
        "FROM outbox_handler_slot GROUP BY handler_name");
    tx.commit();

    metrics::DbGauges gauges;
    // This host's handlers (0 or 1) and every handler paused fleet-wide (1).
    for (const auto& entry : handlers.entries()) gauges.handler_paused[entry.name] = false;
    for (const auto& p : paused) gauges.handler_paused[p[0].as<std::string>()] = true;
    for (const auto& slot : slots) gauges.handler_slots_taken[slot[0].as<std::string>()] = slot[1].as<long long>();
    gauges.backlog["PENDING"] = row[0].as<long long>();
    gauges.backlog["RETRY_WAIT"] = row[1].as<long long>();
    gauges.backlog["PROCESSING"] = row[2].as<long long>();
    gauges.backlog["REVIEW_REQUIRED"] = row[3].as<long long>();
    gauges.oldest_delay_seconds = row[4].as<double>();
    gauges.handler_oldest_delay_seconds = handler_delays(handler_types, row[5].c_str());
    gauges.oldest_review_seconds = row[6].as<double>();
    gauges.blocked = row[7].as<long long>();
    return gauges;
}

std::vector<BlockingHead> read_unhandled_blocking_heads(pqxx::transaction_base& tx,
                                                        const std::vector<std::string>& handled_types,
                                                        const std::optional<std::string>& company_id) {
    std::vector<BlockingHead> heads;
    for (const auto& row : tx.exec_params(kUnhandledHeadsSql, db::pg_array(handled_types), company_id)) {
        heads.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                         row[3].as<std::string>(), row[4].as<long long>()});
    }
    return heads;
}

StatusReport read_status_report(pqxx::connection& conn, const std::vector<std::string>& handled_types) {
    pqxx::read_transaction tx(conn);
    StatusReport report;
    for (const auto& row : tx.exec(kCountsSql)) {
        report.counts.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<long long>()});
    }
    report.oldest_seconds = tx.exec(kOldestSql)[0][0].as<long long>();
    report.blocked = tx.exec(kBlockedSql)[0][0].as<long long>();
    for (const auto& row : tx.exec(kUnhandledSql)) {
        report.unhandled.push_back({row[0].as<std::string>(), row[1].as<long long>(), row[2].as<long long>()});
    }
    for (const auto& row : tx.exec(kReviewSql)) {
        report.review.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<long long>()});
    }
    report.blocking_heads = read_unhandled_blocking_heads(tx, handled_types, std::nullopt);
    tx.commit();
    return report;
}

void ping_database(pqxx::connection& conn, std::chrono::milliseconds timeout) {
    pqxx::read_transaction tx(conn);
    limit_statement(tx, timeout);
    tx.exec1("SELECT 1");
    tx.commit();
}

}  // namespace outbox::operations
