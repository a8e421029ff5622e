#pragma once
// The common machinery of the example remote services (the AI classifier and the stats
// admin server): an HTTP server on 127.0.0.1 in a background thread that misbehaves on
// purpose — latency, error statuses, stalls past the client's timeout, responses lost after
// the work was done, and a per-second rate limit — and records what it saw so tests can
// check what a client really sent.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace outbox::examples {

/// What a service does wrong, and how often. Rates are probabilities per request (each
/// 0..1, together at most 1); a request suffers at most one of them.
struct FaultConfig {
    std::chrono::milliseconds latency_min{0};  ///< each request's work takes a uniform time in [min, max]
    std::chrono::milliseconds latency_max{0};
    double rate_409 = 0;        ///< answer 409 Conflict without doing the work
    double rate_429 = 0;        ///< answer 429 with Retry-After without doing the work
    double rate_500 = 0;        ///< answer 500 without doing the work
    double rate_503 = 0;        ///< answer 503 with Retry-After without doing the work
    double rate_timeout = 0;    ///< stall for `stall` without doing the work (the client times out)
    double rate_lost_drop = 0;  ///< do the work, then drop the connection mid-response
    double rate_lost_late = 0;  ///< do the work slowly (for `stall`), answering after the client timed out
    std::chrono::milliseconds stall{std::chrono::seconds{6}};  ///< make it longer than the client's timeout
    int retry_after_seconds = 1;    ///< Retry-After sent with 429 and 503
    int rate_limit_per_second = 0;  ///< a call arriving after this many in the last second gets 429; 0: off
    std::uint64_t seed = 1;         ///< the random faults are reproducible for a given seed

    /// Throws std::invalid_argument naming the bad field.
    void validate() const;
};

/// A response forced on the next request, ahead of the random faults (tests script exact
/// sequences with it). The rate limit still applies first.
struct ScriptedResponse {
    enum class Kind {
        Status,    ///< answer `status` with `body` (and Retry-After when set) without doing the work
        Timeout,   ///< stall without doing the work
        LostDrop,  ///< do the work, then drop the connection mid-response
        LostLate,  ///< do the work slowly (for the stall), then answer: too late for the client
        Normal,    ///< do the work and answer normally
    };
    Kind kind = Kind::Status;
    int status = 503;
    std::optional<std::string> retry_after;  ///< sent verbatim as Retry-After
    std::string body = R"({"error":"scripted"})";
    std::optional<std::chrono::milliseconds> delay;  ///< replaces the random latency for this request

    static ScriptedResponse answer(int status, std::optional<std::string> retry_after = std::nullopt) {
        ScriptedResponse response;
        response.status = status;
        response.retry_after = std::move(retry_after);
        return response;
    }
    static ScriptedResponse answer_body(int status, std::string body) {
        ScriptedResponse response;
        response.status = status;
        response.body = std::move(body);
        return response;
    }
    static ScriptedResponse of(Kind kind) {
        ScriptedResponse response;
        response.kind = kind;
        return response;
    }
    ScriptedResponse& after(std::chrono::milliseconds latency) {
        delay = latency;
        return *this;
    }
};

/// One request to a service's work route, as the service saw it.
struct CallRecord {
    std::chrono::steady_clock::time_point arrived;
    std::chrono::system_clock::time_point arrived_wall;
    std::chrono::system_clock::time_point answered_wall;  ///< when the response was written or dropped (epoch until then)
    std::string idempotency_key;
    std::string authorization;
    std::string body;     ///< the request body
    std::string outcome;  ///< ok, rate_limited, scripted, http_409/429/500/503, timeout, lost_drop, lost_late
    int status = 0;       ///< status sent (for lost responses: the one that was lost; 0 for a stall)
};

/// Base of the example services. Thread-safe: accessors may be called while it serves.
class FaultyHttpService {
public:
    FaultyHttpService(std::string name, FaultConfig faults);
    /// Derived services call stop() in their own destructor: their handlers use their members.
    virtual ~FaultyHttpService();
    FaultyHttpService(const FaultyHttpService&) = delete;
    FaultyHttpService& operator=(const FaultyHttpService&) = delete;

    /// Listens on 127.0.0.1:`port` (0: an ephemeral port) in a background thread. Throws
    /// std::runtime_error when the port cannot be bound.
    void start(int port = 0);
    /// Stops listening, wakes stalled requests and joins the server thread. Idempotent.
    void stop();

    [[nodiscard]] int port() const noexcept { return port_; }
    [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }

    /// Queues responses for the next requests, in order.
    void script(std::vector<ScriptedResponse> responses);
    /// Replaces the fault configuration (e.g. to heal a service mid-test).
    void set_faults(const FaultConfig& faults);

    [[nodiscard]] std::vector<CallRecord> calls() const;
    [[nodiscard]] std::size_t call_count() const;
    /// Responses written, by status (lost and stalled ones are not counted here).
    [[nodiscard]] std::map<int, std::size_t> responses_by_status() const;
    /// Calls by outcome (see CallRecord::outcome).
    [[nodiscard]] std::map<std::string, std::size_t> calls_by_outcome() const;
    /// The most calls that arrived within any interval shorter than `window`.
    [[nodiscard]] std::size_t max_calls_in_window(std::chrono::milliseconds window) const;

protected:
    struct Reply {
        int status = 200;
        std::string body;
    };
    /// Does the service's real work for one request. `work` sleeps the simulated latency;
    /// call it where the time should pass (e.g. while an idempotency key is "in progress").
    using Processor = std::function<Reply(const httplib::Request&, const std::function<void()>& work)>;

    /// Registers a POST route whose requests go through rate limiting and fault injection
    /// before (or around) `processor`. Call before start().
    void post_route(const std::string& path, Processor processor);
    /// For plain routes (e.g. GET stats) that bypass the faults. Call before start().
    httplib::Server& server() noexcept { return server_; }

private:
    struct Decision {
        ScriptedResponse::Kind kind = ScriptedResponse::Kind::Normal;
        int status = 200;
        std::optional<std::string> retry_after;
        std::string body;
        std::string outcome = "ok";
        std::chrono::milliseconds latency{0};
        std::chrono::milliseconds stall{0};
    };
    Decision decide(std::chrono::steady_clock::time_point now);
    /// Sleeps up to `duration`; returns false when woken early by stop().
    bool pause(std::chrono::milliseconds duration);
    void serve(const httplib::Request& request, httplib::Response& response, const Processor& processor);

    const std::string name_;
    httplib::Server server_;
    std::thread thread_;
    int port_ = 0;

    mutable std::mutex mutex_;
    std::condition_variable stop_cv_;
    bool stopping_ = false;
    FaultConfig faults_;
    std::mt19937_64 random_;
    std::deque<ScriptedResponse> script_;
    std::deque<std::chrono::steady_clock::time_point> recent_;  // arrivals in the last second
    std::vector<CallRecord> calls_;
    std::map<int, std::size_t> by_status_;
};

}  // namespace outbox::examples
