#include "report.hpp"

#include "events.hpp"

#include <charconv>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

namespace outbox::examples::app {
namespace {

// Rows of this run only: websites are named site-<tag>-<n>.example.com, users have ids $2..$3
// (first_user_id). CASE: a user_id that is not a number is never cast.
constexpr const char* kEventFilter =
    "($1 = '' OR (event_type = 'WebsiteRegistered' AND payload->>'domain' LIKE 'site-' || $1 || '-%') "
    "OR (event_type = 'MissionCompleted' AND CASE WHEN payload->>'user_id' ~ '^[0-9]{1,15}$' "
    "THEN (payload->>'user_id')::bigint END BETWEEN $2 AND $3))";

std::optional<nlohmann::json> get_json(const std::string& base_url, const std::string& path) {
    if (base_url.empty()) return std::nullopt;
    httplib::Client client(base_url);
    client.set_connection_timeout(std::chrono::seconds{2});
    client.set_read_timeout(std::chrono::seconds{2});
    const auto result = client.Get(path);
    if (!result || result->status != 200) return std::nullopt;
    nlohmann::json body = nlohmann::json::parse(result->body, nullptr, false);
    if (body.is_discarded()) return std::nullopt;
    return body;
}

std::string join_counts(const std::map<std::string, long long>& counts) {
    std::ostringstream out;
    bool first = true;
    for (const auto& [name, count] : counts) {
        out << (first ? "" : ", ") << name << " " << count;
        first = false;
    }
    return first ? "none" : out.str();
}

}  // namespace

bool print_report(const ReportOptions& options) {
    pqxx::connection conn(options.database_url);
    pqxx::read_transaction tx(conn);
    const std::string& tag = options.tag;
    const std::int64_t first_user = first_user_id(tag);
    const std::int64_t last_user = first_user + kUsersPerTag - 1;

    std::map<std::string, std::map<std::string, long long>> by_type;
    long long unfinished = 0;
    for (const auto& row : tx.exec_params(std::string("SELECT event_type, status, count(*) FROM event_publication WHERE ") +
                                              kEventFilter + " GROUP BY 1, 2",
                                          tag, first_user, last_user)) {
        const std::string status = row[1].as<std::string>();
        by_type[row[0].as<std::string>()][status] = row[2].as<long long>();
        if (status != "COMPLETED" && status != "REVIEW_REQUIRED") unfinished += row[2].as<long long>();
    }
    std::cout << "  events      ";
    if (by_type.empty()) std::cout << "none yet";
    bool first_type = true;
    for (const auto& [type, counts] : by_type) {
        std::cout << (first_type ? "" : " | ") << type << ": " << join_counts(counts);
        first_type = false;
    }
    std::cout << "\n";

    std::map<std::string, long long> waiting_codes, review_codes;
    for (const auto& row : tx.exec_params(std::string("SELECT status, last_error_code, count(*) FROM event_publication "
                                                      "WHERE status IN ('RETRY_WAIT', 'REVIEW_REQUIRED') AND "
                                                      "last_error_code IS NOT NULL AND ") +
                                              kEventFilter + " GROUP BY 1, 2",
                                          tag, first_user, last_user)) {
        auto& target = row[0].as<std::string>() == "RETRY_WAIT" ? waiting_codes : review_codes;
        target[row[1].as<std::string>()] = row[2].as<long long>();
    }
    std::cout << "  errors      retrying: " << join_counts(waiting_codes) << "; review: " << join_counts(review_codes)
              << "\n";

    const auto websites = tx.exec_params(
        "SELECT count(*), count(category) FROM website WHERE $1 = '' OR domain LIKE 'site-' || $1 || '-%'", tag);
    std::cout << "  websites    " << websites[0][0].as<long long>() << " registered, "
              << websites[0][1].as<long long>() << " classified\n";

    const long long missions =
        tx.exec_params("SELECT count(*) FROM user_mission_completion WHERE $1 = '' OR user_id BETWEEN $2 AND $3",
                       tag, first_user, last_user)[0][0]
            .as<long long>();
    std::map<std::string, long long> completed;
    long long completed_total = 0;
    for (const auto& row : tx.exec_params(std::string("SELECT payload->>'user_id', count(*) FROM event_publication "
                                                      "WHERE event_type = 'MissionCompleted' AND status = 'COMPLETED' "
                                                      "AND ") +
                                              kEventFilter + " GROUP BY 1",
                                          tag, first_user, last_user)) {
        completed[row[0].as<std::string>()] = row[1].as<long long>();
        completed_total += row[1].as<long long>();
    }

    bool consistent = true;
    const auto admin = get_json(options.admin_url, "/api/stats/users");
    if (admin) {
        std::map<std::string, long long> counted;
        long long counted_total = 0;
        const nlohmann::json by_user = admin->value("users", nlohmann::json::object());
        for (const auto& [user, count] : by_user.items()) {
            if (!tag.empty()) {
                long long id = 0;
                const auto [end, error] = std::from_chars(user.data(), user.data() + user.size(), id);
                if (error != std::errc{} || end != user.data() + user.size() || id < first_user || id > last_user) continue;
            }
            if (!count.is_number_integer()) continue;
            counted[user] = count.get<long long>();
            counted_total += count.get<long long>();
        }
        std::set<std::string> users;
        for (const auto& [user, count] : counted) users.insert(user);
        for (const auto& [user, count] : completed) users.insert(user);
        std::size_t matching = 0;
        for (const auto& user : users) {
            const auto a = counted.find(user);
            const auto c = completed.find(user);
            if ((a == counted.end() ? 0 : a->second) == (c == completed.end() ? 0 : c->second)) ++matching;
        }
        consistent = matching == users.size();
        std::cout << "  missions    " << missions << " completed in the app, " << completed_total
                  << " delivered (event COMPLETED); admin counted " << counted_total << " for " << counted.size()
                  << " users; per-user equal: " << matching << "/" << users.size() << "\n";
        std::cout << "  admin       " << admin->value("calls", 0) << " calls, " << admin->value("replayed", 0)
                  << " answered from its idempotency store, " << admin->value("in_progress_conflicts", 0)
                  << " refused as in progress (409), faults " << admin->value("outcomes", nlohmann::json::object()).dump() << "\n";
    } else {
        consistent = false;
        std::cout << "  missions    " << missions << " completed in the app, " << completed_total
                  << " delivered; admin server unreachable\n";
    }
    if (const auto classifier = get_json(options.classifier_url, "/v1/stats")) {
        std::cout << "  classifier  " << classifier->value("calls", 0) << " calls, busiest second "
                  << classifier->value("max_calls_in_any_second", 0) << " calls, faults " << classifier->value("outcomes", nlohmann::json::object()).dump()
                  << "\n";
    } else if (!options.classifier_url.empty()) {
        std::cout << "  classifier  unreachable\n";
    }

    if (!options.final) return true;
    if (unfinished > 0) {
        std::cout << "  verdict     " << unfinished << " events still unfinished; counts cannot be compared yet\n";
        return false;
    }
    if (consistent) {
        std::cout << "  verdict     OK: for every user the admin server counted exactly the missions whose events "
                     "completed ("
                  << completed_total << ")\n";
    } else {
        std::cout << "  verdict     MISMATCH between the admin server's counts and the completed missions\n";
    }
    return consistent;
}

}  // namespace outbox::examples::app
