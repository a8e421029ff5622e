#include "operations/overview_query.hpp"

#include <array>
#include <map>
#include <set>
#include <vector>

#include <pqxx/pqxx>

#include "core/event_status.hpp"
#include "db/event_sql.hpp"
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
    for (const auto& row : tx.exec_params(db::event_sql::kOverviewByType, company_id)) {
        const auto count = row[2].as<long long>();
        by_type.push_back({{"event_type", row[0].c_str()}, {"status", row[1].c_str()}, {"count", count}});
        counts[row[1].c_str()] = counts.value(row[1].c_str(), 0LL) + count;
    }
    json oldest = json::array();
    for (const auto& [handler, seconds] : read_handler_oldest_delays(tx, handlers, company_id)) {
        oldest.push_back({{"handler", handler}, {"oldest_seconds", seconds}});
    }
    json per_minute = json::array();
    for (const auto& row : tx.exec_params(db::event_sql::kOverviewPerMinute, company_id)) {
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
    for (const auto& row : tx.exec_params(db::event_sql::kReviewGroups, company_id)) {
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
