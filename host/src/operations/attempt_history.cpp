#include "operations/attempt_history.hpp"

#include <pqxx/pqxx>

namespace outbox::operations {
namespace {

using nlohmann::json;

// One index descent per partition (outbox_attempt_event_idx); the event itself decides
// whether the caller may see it, as for every event read.
constexpr const char* kAttemptsSql = R"SQL(
SELECT a.attempt, a.handler, a.host, to_char(a.started_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(a.ended_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), a.outcome, a.error_code,
       to_char(a.retry_after, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM outbox_attempt a
WHERE a.event_id = $1::uuid AND a.company_id = $2
ORDER BY a.started_at, a.ended_at, a.attempt
LIMIT 1000
)SQL";

json text_or_null(const pqxx::field& field) { return field.is_null() ? json(nullptr) : json(field.c_str()); }

}  // namespace

std::optional<json> read_attempts(pqxx::connection& conn, const std::string& event_id,
                                  const std::optional<std::string>& company_id, bool with_hosts) {
    pqxx::read_transaction tx(conn);
    tx.exec("SET LOCAL statement_timeout = '5s'");
    tx.exec("SET LOCAL TIME ZONE 'UTC'");
    const pqxx::result event =
        tx.exec_params("SELECT company_id FROM event_publication WHERE event_id = $1::uuid AND ($2::text IS NULL OR "
                       "company_id = $2)",
                       event_id, company_id);
    if (event.empty()) return std::nullopt;
    json attempts = json::array();
    for (const auto& row : tx.exec_params(kAttemptsSql, event_id, event[0][0].as<std::string>())) {
        json entry = {{"attempt", row[0].as<int>()},     {"handler", text_or_null(row[1])},
                      {"started_at", row[3].c_str()},    {"ended_at", row[4].c_str()},
                      {"outcome", row[5].c_str()},       {"error_code", text_or_null(row[6])},
                      {"retry_after", text_or_null(row[7])}};
        entry["host"] = with_hosts ? json(row[2].c_str()) : json(nullptr);
        attempts.push_back(std::move(entry));
    }
    return json{{"attempts", std::move(attempts)}};
}

}  // namespace outbox::operations
