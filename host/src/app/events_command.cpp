#include <algorithm>
#include <cctype>
#include <iomanip>
#include <iostream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "app/commands.hpp"
#include "core/identifiers.hpp"
#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "operations/attempt_history.hpp"

namespace outbox::app {
namespace {

using nlohmann::json;

// The event's own fields an operator needs beside its attempts; never its payload.
std::optional<json> read_event(pqxx::connection& conn, const std::string& id) {
    pqxx::read_transaction tx(conn);
    tx.exec("SET LOCAL statement_timeout = '5s'");
    tx.exec("SET LOCAL TIME ZONE 'UTC'");
    const pqxx::result rows = tx.exec_params(
        "SELECT event_type, company_id, status, attempt_count, last_error_code, "
        "to_char(occurred_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), "
        "CASE WHEN next_attempt_at = 'infinity' THEN NULL ELSE to_char(next_attempt_at, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') END "
        "FROM event_publication WHERE event_id = $1::uuid",
        id);
    if (rows.empty()) return std::nullopt;
    const auto& r = rows[0];
    return json{{"event_id", id},
                {"event_type", r[0].c_str()},
                {"company_id", r[1].c_str()},
                {"status", r[2].c_str()},
                {"attempt_count", r[3].as<int>()},
                {"last_error_code", r[4].is_null() ? json(nullptr) : json(r[4].c_str())},
                {"occurred_at", r[5].c_str()},
                {"next_attempt_at", r[6].is_null() ? json(nullptr) : json(r[6].c_str())}};
}

std::string text(const json& value) { return value.is_null() ? std::string("-") : value.get<std::string>(); }

}  // namespace

int events_show_command(const config::Config& config, const std::string& raw_id, const std::string& format) {
    std::string id = core::is_uuid(raw_id) ? raw_id : std::string();
    std::transform(id.begin(), id.end(), id.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    try {
        auto conn = db::open_connection(config.database.url);
        const auto event = id.empty() ? std::nullopt : read_event(*conn, id);
        const auto attempts = event ? operations::read_attempts(*conn, id, std::nullopt, true) : std::nullopt;
        if (!event || !attempts) {
            std::cerr << "outboxd events show: EVENT_NOT_FOUND: no event with this id\n";
            return 1;
        }
        if (format == "json") {
            json answer = *event;
            answer["attempts"] = (*attempts)["attempts"];
            std::cout << answer.dump() << "\n";
            return 0;
        }
        const json& e = *event;
        std::cout << "event " << text(e["event_id"]) << " (" << text(e["event_type"]) << ", company "
                  << text(e["company_id"]) << "): " << text(e["status"]) << ", " << e["attempt_count"].get<int>()
                  << " attempt(s), last error " << text(e["last_error_code"]) << "\n";
        std::cout << "occurred " << text(e["occurred_at"]) << ", next attempt " << text(e["next_attempt_at"]) << "\n";
        const json& list = (*attempts)["attempts"];
        if (list.empty()) {
            std::cout << "no attempt on record (outbox.attempt_history off, not run yet, or older than the retention)\n";
            return 0;
        }
        std::cout << std::left << std::setw(8) << "ATTEMPT" << std::setw(28) << "HANDLER" << std::setw(16) << "OUTCOME"
                  << std::setw(22) << "ERROR" << std::setw(28) << "STARTED" << std::setw(28) << "ENDED"
                  << std::setw(28) << "RETRY AFTER"
                  << "HOST\n";
        for (const json& a : list) {
            std::cout << std::left << std::setw(8) << a["attempt"].get<int>() << std::setw(28) << text(a["handler"])
                      << std::setw(16) << text(a["outcome"]) << std::setw(22) << text(a["error_code"]) << std::setw(28)
                      << text(a["started_at"]) << std::setw(28) << text(a["ended_at"]) << std::setw(28)
                      << text(a["retry_after"]) << text(a["host"]) << "\n";
        }
        return 0;
    } catch (const std::exception&) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        std::cerr << "outboxd events show: " << failure.describe()
                  << "; check database.url / OUTBOX_DATABASE_URL and run `outboxd migrate`\n";
        return 1;
    }
}

}  // namespace outbox::app
