// Circuit breakers (handlers.<name>.circuit_breaker): two in-process hosts run the real
// mission-log-forwarding plugin against a remote on loopback that starts answering 503 and
// later recovers. The breaker pauses the handler fleet-wide within its window, one probe
// call at a time reaches the remote while it is open, a successful probe resumes it, and
// every event reaches the remote exactly once. An operator's pause is never resumed by it,
// and a probe whose host died is taken over once it expires.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "metrics/prometheus.hpp"
#include "operations/backlog_query.hpp"
#include "operations/handler_pause.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

#ifndef OUTBOX_SAMPLE_MISSION_LOG_FORWARDING_PLUGIN
#define OUTBOX_SAMPLE_MISSION_LOG_FORWARDING_PLUGIN ""
#endif

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kHandler = "mission-log-forwarding";
constexpr const char* kPayload = R"({"completion_id": 7, "user_id": 42, "mission_id": 3, "solar_term": "qingming"})";
// Long enough that two calls in flight at once overlap visibly at the remote.
constexpr auto kCallTime = 50ms;
// The breaker under test: half of at least 10 calls within 2 s opens it; probes every 1 s.
const config::CircuitBreakerSettings kBreaker{0.5, 10, 2s, 1s};

// The stats admin server on loopback: POST /api/stats/mission-log answers 503 to calls that
// arrive while it is failing, else 200, and records every call's start, the calls in flight at once, and the 2xx
// answers per Idempotency-Key (the event id).
class MissionLogRemote {
public:
    MissionLogRemote() {
        server_.Post("/api/stats/mission-log", [this](const httplib::Request& request, httplib::Response& response) {
            // The answer is decided when the call arrives, so a call already in flight
            // when the remote recovers still fails (as it would at a remote that was down).
            bool fail = false;
            {
                const std::lock_guard lock(mutex_);
                starts_.push_back(Clock::now());
                max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
                fail = failing_;
            }
            std::this_thread::sleep_for(kCallTime);  // the remote's own work
            const std::lock_guard lock(mutex_);
            --in_flight_;
            if (fail) {
                response.status = 503;
                response.set_content(R"({"error":"unavailable"})", "application/json");
                return;
            }
            ++answered_[request.get_header_value("Idempotency-Key")];
            response.status = 200;
            response.set_content(R"({"ok":true})", "application/json");
        });
        server_.Get("/ready", [](const httplib::Request&, httplib::Response& response) { response.status = 204; });
        port_ = server_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        httplib::Client("127.0.0.1", port_).Get("/ready");  // the loop runs, so stop() will reach it
    }
    ~MissionLogRemote() {
        server_.stop();
        thread_.join();
    }
    MissionLogRemote(const MissionLogRemote&) = delete;
    MissionLogRemote& operator=(const MissionLogRemote&) = delete;

    [[nodiscard]] std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
    void set_failing(bool failing) {
        const std::lock_guard lock(mutex_);
        failing_ = failing;
    }
    /// Calls that started in [from, to).
    [[nodiscard]] int calls_between(Clock::time_point from, Clock::time_point to) const {
        const std::lock_guard lock(mutex_);
        return static_cast<int>(std::count_if(starts_.begin(), starts_.end(),
                                              [&](Clock::time_point t) { return t >= from && t < to; }));
    }
    [[nodiscard]] Clock::time_point first_call_after(Clock::time_point from) const {
        const std::lock_guard lock(mutex_);
        for (const auto t : starts_) {
            if (t >= from) return t;
        }
        return Clock::time_point::max();
    }
    /// The most calls in flight at once since the last reset.
    [[nodiscard]] int max_in_flight() const {
        const std::lock_guard lock(mutex_);
        return max_in_flight_;
    }
    void reset_max_in_flight() {
        const std::lock_guard lock(mutex_);
        max_in_flight_ = in_flight_;
    }
    [[nodiscard]] std::map<std::string, int> answered() const {
        const std::lock_guard lock(mutex_);
        return answered_;
    }

private:
    httplib::Server server_;
    std::thread thread_;
    int port_ = 0;
    mutable std::mutex mutex_;
    bool failing_ = false;
    std::vector<Clock::time_point> starts_;
    int in_flight_ = 0;
    int max_in_flight_ = 0;
    std::map<std::string, int> answered_;
};

class HandlerCircuitBreaker : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_STRNE(OUTBOX_SAMPLE_MISSION_LOG_FORWARDING_PLUGIN, "")
            << "built without the sample plugins (OUTBOX_BUILD_PLUGINS=OFF): these tests need mission-log-forwarding";
    }

    std::unique_ptr<TestHost> start_host(const std::string& id) {
        auto options = fast_options(db_.url(), id);
        options.poll_interval = 200ms;
        // Quick retries, and enough attempts that no event reaches review during the outage.
        options.initial_backoff = 50ms;
        options.max_backoff = 300ms;
        options.max_attempts = 200;
        config::HandlerSettings settings;
        settings.timeout = 5s;
        settings.config_json = nlohmann::json{{"base_url", remote_.base_url()}, {"timeout", "2s"}}.dump();
        settings.circuit_breaker = kBreaker;
        auto host = std::make_unique<TestHost>(options, std::vector<std::string>{OUTBOX_SAMPLE_MISSION_LOG_FORWARDING_PLUGIN},
                                               plugin::HandlerConfigs{}, 5s,
                                               std::map<std::string, config::HandlerSettings>{{kHandler, settings}});
        host->start();
        return host;
    }

    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    std::string pause_actor() const {
        const auto rows = db_.exec(std::string("SELECT paused_by FROM outbox_handler_pause WHERE handler_name = '") +
                                   kHandler + "'");
        return rows.empty() ? std::string() : rows[0][0].as<std::string>();
    }
    bool breaker_open() const { return pause_actor() == "circuit-breaker"; }
    long long completed() const {
        return count("SELECT count(*) FROM event_publication WHERE event_type = 'MissionCompleted' AND status = 'COMPLETED'");
    }
    // Every event reached the remote with exactly one 2xx answer, and none was left behind.
    void expect_each_event_delivered_once(const std::vector<std::string>& ids) const {
        const auto answered = remote_.answered();
        EXPECT_EQ(answered.size(), ids.size()) << "one event id per delivered event, no stranger";
        for (const auto& id : ids) {
            const auto it = answered.find(id);
            EXPECT_TRUE(it != answered.end() && it->second == 1)
                << id << " answered " << (it == answered.end() ? 0 : it->second) << " time(s)";
        }
        EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'"), 0);
    }
    std::string scrape(TestHost& host) const {
        pqxx::connection conn(db_.url());
        const auto gauges = operations::read_db_gauges(conn, host.handlers(), 5s);
        return metrics::render_prometheus(host.metrics(), gauges, {"host", "test"});
    }
    static std::uint64_t openings(TestHost& host) {
        const auto all = host.metrics().circuit_openings();
        const auto it = all.find(kHandler);
        return it == all.end() ? 0 : it->second;
    }
    static std::uint64_t probes(TestHost& host, const std::string& result) {
        const auto all = host.metrics().circuit_probes();
        const auto it = all.find({kHandler, result});
        return it == all.end() ? 0 : it->second;
    }

    TestDatabase db_;
    MissionLogRemote remote_;
};

TEST_F(HandlerCircuitBreaker, OpensWithinTheWindowProbesOnceAtATimeAndClosesAfterRecoveryWithNoEventLost) {
    std::vector<std::unique_ptr<TestHost>> hosts;
    hosts.push_back(start_host("host-a"));
    hosts.push_back(start_host("host-b"));
    std::vector<std::string> ids = publish_many(db_.url(), "MissionCompleted", kPayload, 10);
    ASSERT_TRUE(wait_until([&] { return completed() == 10; }, 20s)) << "a healthy remote: the breaker stays closed";
    EXPECT_FALSE(breaker_open());
    EXPECT_NE(scrape(*hosts[0]).find("outbox_circuit_open{handler=\"mission-log-forwarding\"} 0\n"), std::string::npos)
        << scrape(*hosts[0]);

    // The remote starts failing while events keep coming.
    remote_.set_failing(true);
    const auto failing_since = Clock::now();
    for (auto& id : publish_many(db_.url(), "MissionCompleted", kPayload, 60)) ids.push_back(std::move(id));
    ASSERT_TRUE(wait_until([&] { return breaker_open(); }, 10s)) << "the breaker opens";
    const auto opened = Clock::now();
    // Counted from the first failing call, not from before publishing (which a loaded machine
    // slows): within the window (2 s), plus 1 s for the hosts' scheduling and this test's
    // polls. A host needs its first 10 calls (about 3 rounds of 50 ms calls) to judge.
    EXPECT_LT(opened - remote_.first_call_after(failing_since), kBreaker.window + 1s);

    const pqxx::result audit = db_.exec(
        "SELECT detail FROM audit_event WHERE actor = 'circuit-breaker' AND action = 'outbox.handler_paused' "
        "AND target_id = 'mission-log-forwarding'");
    ASSERT_EQ(audit.size(), 1u);
    const auto detail = nlohmann::json::parse(audit[0][0].as<std::string>());
    EXPECT_GE(detail["calls"].get<int>(), 10) << detail;
    EXPECT_GE(detail["failures"].get<int>() * 2, detail["calls"].get<int>()) << detail;
    EXPECT_EQ(detail["window"], "2s") << detail;
    EXPECT_EQ(detail["failure_ratio"], 0.5) << detail;
    EXPECT_NE(detail["reason"].get<std::string>().find("failed with a retryable error within 2s"), std::string::npos)
        << detail;
    EXPECT_EQ(detail.dump().find("qingming"), std::string::npos) << "no payload in the audit: " << detail;
    EXPECT_EQ(openings(*hosts[0]) + openings(*hosts[1]), 1u) << "one host's verdict paused the fleet";

    // While open, only probes reach the remote: one per cool-down (1 s) for the whole fleet,
    // never two at once. Calls already running at the pause end within one call time.
    std::this_thread::sleep_for(300ms);  // observation period start: the in-flight calls ended
    remote_.reset_max_in_flight();
    const auto watch_from = Clock::now();
    std::this_thread::sleep_for(4s);  // observation period: what does not happen is what is measured
    const int calls_while_open = remote_.calls_between(watch_from, Clock::now());
    // 4 s at one probe per 1 s cool-down is 4; one more when a probe and the period's edges
    // line up. Without the breaker the hosts made about 8 calls per 50 ms (160 per second).
    EXPECT_LE(calls_while_open, 5) << "calls drop to the probe rate";
    EXPECT_GE(calls_while_open, 2) << "probes are made after each cool-down";
    EXPECT_EQ(remote_.max_in_flight(), 1) << "one probe at a time across both hosts";
    EXPECT_TRUE(breaker_open()) << "failed probes keep it open";
    EXPECT_GE(probes(*hosts[0], "failure") + probes(*hosts[1], "failure"), 2u);
    const std::string open_scrape = scrape(*hosts[1]);
    EXPECT_NE(open_scrape.find("outbox_circuit_open{handler=\"mission-log-forwarding\"} 1\n"), std::string::npos)
        << open_scrape;
    EXPECT_NE(open_scrape.find("outbox_handler_paused{handler=\"mission-log-forwarding\"} 1\n"), std::string::npos);
    EXPECT_EQ(count("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), 0);

    // The remote recovers: the next probe succeeds and resumes the handler everywhere.
    remote_.set_failing(false);
    ASSERT_TRUE(wait_until([&] { return pause_actor().empty(); }, 10s)) << "a successful probe closes the breaker";
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE actor = 'circuit-breaker' "
                    "AND action = 'outbox.handler_resumed' AND target_id = 'mission-log-forwarding'"),
              1);
    EXPECT_EQ(probes(*hosts[0], "success") + probes(*hosts[1], "success"), 1u);
    ASSERT_TRUE(wait_until([&] { return completed() == 70; }, 30s)) << "every event completes after the resume";
    expect_each_event_delivered_once(ids);
    EXPECT_NE(scrape(*hosts[0]).find("outbox_circuit_open{handler=\"mission-log-forwarding\"} 0\n"), std::string::npos);
    EXPECT_NE(scrape(*hosts[0]).find("outbox_circuit_probes_total{handler=\"mission-log-forwarding\",result=\"failure\"}"),
              std::string::npos);
    EXPECT_EQ(openings(*hosts[0]) + openings(*hosts[1]), 1u);
    for (auto& host : hosts) EXPECT_TRUE(host->stop());
}

TEST_F(HandlerCircuitBreaker, AnOperatorsPauseIsNeverResumedByTheBreaker) {
    remote_.set_failing(true);
    auto host = start_host("host-a");
    const auto ids = publish_many(db_.url(), "MissionCompleted", kPayload, 30);
    ASSERT_TRUE(wait_until([&] { return breaker_open(); }, 10s));

    // The operator pauses the handler the breaker paused: the pause becomes theirs.
    {
        pqxx::connection conn(db_.url());
        EXPECT_TRUE(operations::set_handler_paused(conn, kHandler, true, "cli:ops", "cli"));
        EXPECT_FALSE(operations::set_handler_paused(conn, kHandler, true, "cli:ops", "cli")) << "now an ordinary pause";
    }
    EXPECT_EQ(pause_actor(), "cli:ops");
    EXPECT_EQ(count("SELECT count(*) FROM outbox_handler_pause WHERE probe_after IS NOT NULL OR probe_token IS NOT NULL"),
              0);
    remote_.set_failing(false);
    // A probe running at the takeover may still end (one call time), and its verdict must
    // find nothing to resume.
    std::this_thread::sleep_for(300ms);
    const auto watch_from = Clock::now();
    // Three cool-downs: each would have brought a probe, and the successful one a resume.
    std::this_thread::sleep_for(3 * kBreaker.cool_down);
    EXPECT_EQ(remote_.calls_between(watch_from, Clock::now()), 0) << "no probe of an operator's pause";
    EXPECT_EQ(pause_actor(), "cli:ops") << "the breaker never resumes an operator's pause";
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.handler_resumed'"), 0);
    EXPECT_EQ(completed(), 0);

    {
        pqxx::connection conn(db_.url());
        EXPECT_TRUE(operations::set_handler_paused(conn, kHandler, false, "cli:ops", "cli"));
    }
    ASSERT_TRUE(wait_until([&] { return completed() == 30; }, 30s));
    expect_each_event_delivered_once(ids);
    EXPECT_TRUE(host->stop());
}

TEST_F(HandlerCircuitBreaker, AProbeWhoseHostDiedIsTakenOverOnceItExpires) {
    // A breaker opened long ago whose probe is held by a host that died mid-call: its hold
    // runs out 2 s from now. The remote is healthy again.
    // Read before the INSERT: the hold ends 2 s after the database's now(), which is later
    // (by the INSERT's own latency on a loaded machine), never earlier.
    const auto expires = Clock::now() + 2s;
    db_.exec("INSERT INTO outbox_handler_pause (handler_name, paused_by, paused_at, probe_after, probe_owner, "
             "probe_token, probe_expires_at) VALUES ('mission-log-forwarding', 'circuit-breaker', "
             "now() - interval '1 hour', now() - interval '59 minutes', 'dead-host:1', gen_random_uuid(), "
             "now() + interval '2 seconds')");
    const auto ids = publish_many(db_.url(), "MissionCompleted", kPayload, 5);
    auto host = start_host("host-a");
    ASSERT_TRUE(wait_until([&] { return pause_actor().empty(); }, 15s)) << "the probe is taken over and succeeds";
    // The live host waited for the dead one's hold: its first call starts at the expiry, not
    // before (50 ms of slack for the two clocks read here and by the database).
    EXPECT_GE(remote_.first_call_after(Clock::time_point{}), expires - 50ms);
    ASSERT_TRUE(wait_until([&] { return completed() == 5; }, 20s));
    expect_each_event_delivered_once(ids);
    EXPECT_EQ(probes(*host, "success"), 1u);
    EXPECT_TRUE(host->stop());
}

TEST_F(HandlerCircuitBreaker, StatusPrintsALinePerOpenBreaker) {
    db_.exec("INSERT INTO outbox_handler_pause (handler_name, paused_by, probe_after) VALUES "
             "('mission-log-forwarding', 'circuit-breaker', '2030-01-02T03:04:05Z'), ('other', 'cli:ops', NULL)");
    db_.exec("INSERT INTO outbox_handler_pause (handler_name, paused_by, probe_owner, probe_token, probe_expires_at) "
             "VALUES ('third', 'circuit-breaker', 'host-b', gen_random_uuid(), now() + interval '1 minute')");
    const auto [code, out] = run_command({OUTBOXD_BINARY, "status"}, {{"OUTBOX_DATABASE_URL", db_.url()}});
    EXPECT_EQ(code, 0) << out;
    const auto section = out.find("OPEN CIRCUIT BREAKERS");
    ASSERT_NE(section, std::string::npos) << out;
    const std::string breakers = out.substr(section, out.find("\n\n", section) + 1 - section);
    EXPECT_NE(breakers.find("mission-log-forwarding"), std::string::npos) << breakers;
    EXPECT_NE(breakers.find("next probe at 2030-01-02T03:04:05Z"), std::string::npos) << breakers;
    EXPECT_NE(breakers.find("probe running on host-b"), std::string::npos) << breakers;
    EXPECT_EQ(breakers.find("other"), std::string::npos) << "an operator's pause is no breaker: " << breakers;
    EXPECT_EQ(std::count(breakers.begin(), breakers.end(), '\n'), 3) << "the heading and one line each: " << breakers;
}

TEST_F(HandlerCircuitBreaker, ABadSettingStopsTheCommandWithOneLineAndExitCodeTwo) {
    const TempDir dir;
    const std::string file = (dir.path() / "outboxd.yaml").string();
    std::ofstream(file) << "handlers:\n  mission-log-forwarding:\n    circuit_breaker:\n      failure_ratio: 1.5\n";
    const auto [code, out] = run_command({OUTBOXD_BINARY, "status", "--config", file}, {{"OUTBOX_DATABASE_URL", db_.url()}});
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("handlers.mission-log-forwarding.circuit_breaker.failure_ratio = \"1.5\""), std::string::npos)
        << out;
    EXPECT_NE(out.find("greater than 0 and at most 1"), std::string::npos) << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << "one line: " << out;
}

}  // namespace
}  // namespace outbox::test
