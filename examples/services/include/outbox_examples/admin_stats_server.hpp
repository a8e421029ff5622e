#pragma once
// A stand-in for the stats admin server that mission-log-forwarding posts to. It ranks
// users by completed missions, so it must count each mission exactly once however often
// it is delivered.
//
//   POST /api/stats/mission-log  {"completion_id", "user_id", "mission_id", "solar_term"},
//                                ids as JSON integers or strings, Idempotency-Key: <id>
//        201 {"user_id", "user_total"}  counted
//        the stored response again      the key was already counted (not counted twice)
//        409                            the same key is still being processed
//        400                            no Idempotency-Key or a malformed body
//        422                            the key was used before with a different body
//   GET  /api/stats/users        {"total", "users": {user: count}, "replayed", "in_progress_conflicts", ...}

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "outbox_examples/faulty_http_service.hpp"

namespace outbox::examples {

class AdminStatsServer : public FaultyHttpService {
public:
    explicit AdminStatsServer(FaultConfig faults = {});
    /// Stops serving before the members the request handlers use are destroyed.
    ~AdminStatsServer() override { stop(); }
    AdminStatsServer(const AdminStatsServer&) = delete;
    AdminStatsServer& operator=(const AdminStatsServer&) = delete;

    /// Missions counted per user (a numeric user_id as its decimal text).
    [[nodiscard]] std::map<std::string, long long> user_counts() const;
    /// All missions counted (the sum of user_counts()).
    [[nodiscard]] long long total() const;
    /// Requests answered from the idempotency store instead of being counted again.
    [[nodiscard]] long long replayed() const;
    /// Requests refused with 409 because the same key was still being processed.
    [[nodiscard]] long long in_progress_conflicts() const;
    /// Number of distinct idempotency keys counted.
    [[nodiscard]] std::size_t keys_counted() const;

private:
    Reply record(const httplib::Request& request, const std::function<void()>& work);
    [[nodiscard]] std::string stats_json() const;

    struct KeyState {
        bool done = false;
        std::string fingerprint;  // the request body, to refuse a key reused for another request
        Reply reply;
    };
    mutable std::mutex state_mutex_;
    std::unordered_map<std::string, KeyState> keys_;
    std::map<std::string, long long> users_;
    long long total_ = 0;
    long long replayed_ = 0;
    long long conflicts_ = 0;
};

}  // namespace outbox::examples
