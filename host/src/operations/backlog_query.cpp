#include "operations/backlog_query.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "db/event_sql.hpp"
#include "db/pg_array.hpp"
#include "routing/paused_handlers.hpp"

namespace outbox::operations {
namespace {

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
    const pqxx::row row = tx.exec_params1(db::event_sql::kHandlerOldestDelays, arrays.names, arrays.types, company_id);
    return handler_delays(handlers, row[0].c_str());
}

metrics::DbGauges read_db_gauges(pqxx::connection& conn, const routing::HandlerSet& handlers,
                                 std::chrono::milliseconds timeout) {
    const auto handler_types = handler_types_of(handlers);
    const auto arrays = handler_type_arrays(handler_types);
    pqxx::read_transaction tx(conn);
    limit_statement(tx, timeout);
    const pqxx::row row =
        tx.exec_params1(db::event_sql::kGauges, arrays.names, arrays.types, std::optional<std::string>{});
    const pqxx::result paused = tx.exec("SELECT handler_name, paused_by FROM outbox_handler_pause");
    const pqxx::result slots = tx.exec(
        "SELECT handler_name, count(*) FILTER (WHERE token IS NOT NULL AND expires_at > clock_timestamp()) "
        "FROM outbox_handler_slot GROUP BY handler_name");
    tx.commit();

    metrics::DbGauges gauges;
    // This host's handlers (0 or 1) and every handler paused fleet-wide (1).
    for (const auto& entry : handlers.entries()) gauges.handler_paused[entry.name] = false;
    for (const auto& p : paused) gauges.handler_paused[p[0].as<std::string>()] = true;
    // Circuit breakers: this host's handlers with one (0 or 1) and every open one (1).
    for (const auto& entry : handlers.entries()) {
        if (entry.settings.circuit_breaker) gauges.circuit_open[entry.name] = false;
    }
    for (const auto& p : paused) {
        if (p[1].as<std::string>() == routing::kCircuitBreakerActor) gauges.circuit_open[p[0].as<std::string>()] = true;
    }
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
    for (const auto& row : tx.exec_params(db::event_sql::kUnhandledHeads, db::pg_array(handled_types), company_id)) {
        heads.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::string>(),
                         row[3].as<std::string>(), row[4].as<long long>()});
    }
    return heads;
}

StatusReport read_status_report(pqxx::connection& conn, const std::vector<std::string>& handled_types) {
    pqxx::read_transaction tx(conn);
    StatusReport report;
    for (const auto& row : tx.exec(db::event_sql::kStatusCounts)) {
        report.counts.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<long long>()});
    }
    report.oldest_seconds = tx.exec(db::event_sql::kStatusOldest)[0][0].as<long long>();
    report.blocked = tx.exec(db::event_sql::kStatusBlocked)[0][0].as<long long>();
    for (const auto& row : tx.exec(db::event_sql::kStatusUnhandled)) {
        report.unhandled.push_back({row[0].as<std::string>(), row[1].as<long long>(), row[2].as<long long>()});
    }
    for (const auto& row : tx.exec(db::event_sql::kStatusReview)) {
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
