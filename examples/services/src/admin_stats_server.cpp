#include "outbox_examples/admin_stats_server.hpp"

#include <nlohmann/json.hpp>

namespace outbox::examples {

AdminStatsServer::AdminStatsServer(FaultConfig faults) : FaultyHttpService("admin-stats-server", faults) {
    post_route("/api/stats/mission-log",
               [this](const httplib::Request& request, const std::function<void()>& work) {
                   return record(request, work);
               });
    server().Get("/api/stats/users", [this](const httplib::Request&, httplib::Response& response) {
        response.set_content(stats_json(), "application/json");
    });
}

FaultyHttpService::Reply AdminStatsServer::record(const httplib::Request& request, const std::function<void()>& work) {
    const std::string key = request.get_header_value("Idempotency-Key");
    if (key.empty()) return {400, R"({"error":"Idempotency-Key header is required"})"};
    const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, false);
    const auto text = [](const nlohmann::json& value) {
        return value.is_string() && !value.get<std::string>().empty();
    };
    // Ids arrive as JSON integers or strings, as the application published them.
    for (const char* field : {"completion_id", "user_id", "mission_id"}) {
        if (!body.is_object() || !body.contains(field) || !(body[field].is_number_integer() || text(body[field]))) {
            return {400, std::string(R"({"error":"missing field )") + field + "\"}"};
        }
    }
    if (!body.contains("solar_term") || !text(body["solar_term"])) {
        return {400, R"({"error":"missing field solar_term"})"};
    }
    const std::string user = body["user_id"].is_string() ? body["user_id"].get<std::string>() : body["user_id"].dump();
    const std::string fingerprint = body.dump();
    {
        const std::lock_guard lock(state_mutex_);
        const auto found = keys_.find(key);
        if (found != keys_.end()) {
            if (found->second.fingerprint != fingerprint) {
                return {422, R"({"error":"this Idempotency-Key was used with a different request"})"};
            }
            if (!found->second.done) {
                ++conflicts_;
                return {409, R"({"error":"a request with this Idempotency-Key is still being processed"})"};
            }
            ++replayed_;
            return found->second.reply;
        }
        keys_[key] = KeyState{false, fingerprint, {}};
    }
    // The key stays "in progress" while the work takes its time, so a concurrent retry of
    // the same key sees 409 instead of being counted twice.
    work();
    const std::lock_guard lock(state_mutex_);
    const long long user_total = ++users_[user];
    ++total_;
    Reply reply{201, nlohmann::json{{"user_id", user}, {"user_total", user_total}}.dump()};
    keys_[key] = KeyState{true, fingerprint, reply};
    return reply;
}

std::map<std::string, long long> AdminStatsServer::user_counts() const {
    const std::lock_guard lock(state_mutex_);
    return users_;
}

long long AdminStatsServer::total() const {
    const std::lock_guard lock(state_mutex_);
    return total_;
}

long long AdminStatsServer::replayed() const {
    const std::lock_guard lock(state_mutex_);
    return replayed_;
}

long long AdminStatsServer::in_progress_conflicts() const {
    const std::lock_guard lock(state_mutex_);
    return conflicts_;
}

std::size_t AdminStatsServer::keys_counted() const {
    const std::lock_guard lock(state_mutex_);
    std::size_t done = 0;
    for (const auto& [key, state] : keys_) done += state.done ? 1 : 0;
    return done;
}

std::string AdminStatsServer::stats_json() const {
    nlohmann::json stats;
    {
        const std::lock_guard lock(state_mutex_);
        stats["total"] = total_;
        stats["users"] = users_;
        stats["replayed"] = replayed_;
        stats["in_progress_conflicts"] = conflicts_;
    }
    stats["calls"] = call_count();
    nlohmann::json by_status = nlohmann::json::object();
    for (const auto& [status, count] : responses_by_status()) by_status[std::to_string(status)] = count;
    stats["responses"] = by_status;
    stats["outcomes"] = calls_by_outcome();
    return stats.dump();
}

}  // namespace outbox::examples
