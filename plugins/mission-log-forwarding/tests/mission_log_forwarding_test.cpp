// mission-log-forwarding, loaded from its real .so by the real host runtime, against a
// real PostgreSQL and the example stats admin server on 127.0.0.1: what it sends, the
// state every answer (or missing answer) leaves the event in, and that a lost response
// never counts a mission twice.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <pqxx/pqxx>

#include "outbox_examples/admin_stats_server.hpp"
#include "plugin/plugin_loader.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using examples::AdminStatsServer;
using examples::ScriptedResponse;
using Kind = ScriptedResponse::Kind;

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty()) throw std::runtime_error("cannot read " + path);
    return text.str();
}

double epoch_seconds(std::chrono::system_clock::time_point when) {
    return std::chrono::duration<double>(when.time_since_epoch()).count();
}

class MissionLogForwarding : public ::testing::Test {
protected:
    void SetUp() override {
        db_.exec(read_text(std::string(OUTBOX_EXAMPLES_DIR) + "/schema.sql"));
        admin_.start();
    }

    nlohmann::json config(const std::string& timeout = "2s") const {
        return {{"base_url", admin_.base_url()}, {"timeout", timeout}};
    }

    // backoff: the host's retry delay, long by default so a failed event stays put.
    std::unique_ptr<TestHost> start_host(const nlohmann::json& plugin_config, std::chrono::milliseconds backoff = 60s,
                                         std::chrono::milliseconds handler_timeout = 5s) {
        auto options = fast_options(db_.url(), "mission-log-test");
        options.initial_backoff = backoff;
        options.max_backoff = backoff;
        options.max_attempts = 10;
        auto host = std::make_unique<TestHost>(options, std::vector<std::string>{MISSION_LOG_FORWARDING_PLUGIN},
                                               plugin::HandlerConfigs{{"mission-log-forwarding", plugin_config.dump()}},
                                               handler_timeout);
        host->start();
        return host;
    }

    struct Completed {
        long long completion_id = 0;
        std::string event_id;
    };
    // As the example application does: numeric ids, published as JSON numbers.
    Completed complete_mission(long long user) const {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        const auto id = tx.exec_params("INSERT INTO user_mission_completion (user_id, mission_id, solar_term) "
                                       "VALUES ($1, 3, 'HAJI') RETURNING id",
                                       user)[0][0]
                            .as<long long>();
        const auto event = tx.exec_params("SELECT outbox_publish('acme', 'MissionCompleted', jsonb_build_object("
                                          "'completion_id', $1::bigint, 'user_id', $2::bigint, 'mission_id', 3, "
                                          "'solar_term', 'HAJI'), $2::text)::text",
                                          id, user)[0][0]
                               .as<std::string>();
        tx.commit();
        return {id, event};
    }

    std::string field(const std::string& event_id, const std::string& column) const {
        const auto rows =
            db_.exec("SELECT coalesce(" + column + "::text, '') FROM event_publication WHERE event_id = '" + event_id + "'");
        return rows.empty() ? "" : rows[0][0].as<std::string>();
    }
    bool reaches(const std::string& event_id, const std::string& status, std::chrono::milliseconds timeout = 15s) const {
        return wait_until([&] { return field(event_id, "status") == status; }, timeout);
    }
    void stall_everything_for(std::chrono::milliseconds stall) {
        examples::FaultConfig faults;
        faults.rate_timeout = 1.0;
        faults.stall = stall;
        admin_.set_faults(faults);
    }

    TestDatabase db_;
    AdminStatsServer admin_;
};

TEST_F(MissionLogForwarding, PostsThePayloadWithTheEventIdAsIdempotencyKey) {
    const auto mission = complete_mission(7);
    auto host = start_host(config());
    ASSERT_TRUE(reaches(mission.event_id, "COMPLETED")) << field(mission.event_id, "last_error_code");
    const auto calls = admin_.calls();
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].idempotency_key, mission.event_id);
    EXPECT_EQ(nlohmann::json::parse(calls[0].body), (nlohmann::json{{"completion_id", mission.completion_id},
                                                                    {"user_id", 7},
                                                                    {"mission_id", 3},
                                                                    {"solar_term", "HAJI"}}));
    EXPECT_EQ(admin_.user_counts(), (std::map<std::string, long long>{{"7", 1}}));
    EXPECT_EQ(field(mission.event_id, "attempt_count"), "1");
}

TEST_F(MissionLogForwarding, ForwardsNumericIdsAsNumbersAndEachIdWithItsPublishedType) {
    // PeakTime's ids are Java Longs: 2^53 + 1 must arrive exactly, as a JSON number.
    const std::string numeric = db_.scalar(
        "SELECT outbox_publish('acme', 'MissionCompleted', '{\"completion_id\": 123, \"user_id\": 9007199254740993, "
        "\"mission_id\": 7, \"solar_term\": \"HAJI\"}'::jsonb)::text");
    const std::string mixed = db_.scalar(
        "SELECT outbox_publish('acme', 'MissionCompleted', '{\"completion_id\": \"c-124\", \"user_id\": 42, "
        "\"mission_id\": \"mission-8\", \"solar_term\": \"HAJI\"}'::jsonb)::text");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(numeric, "COMPLETED")) << field(numeric, "last_error_code");
    ASSERT_TRUE(reaches(mixed, "COMPLETED")) << field(mixed, "last_error_code");
    std::map<std::string, nlohmann::json> bodies;
    for (const auto& call : admin_.calls()) bodies[call.idempotency_key] = nlohmann::json::parse(call.body);
    ASSERT_EQ(bodies.size(), 2u);
    const nlohmann::json& sent = bodies.at(numeric);
    EXPECT_TRUE(sent["completion_id"].is_number_integer()) << sent.dump();
    EXPECT_TRUE(sent["user_id"].is_number_integer()) << sent.dump();
    EXPECT_TRUE(sent["mission_id"].is_number_integer()) << sent.dump();
    EXPECT_EQ(sent["completion_id"].get<long long>(), 123);
    EXPECT_EQ(sent["user_id"].get<long long>(), 9007199254740993LL) << "no detour through a double";
    EXPECT_EQ(sent["mission_id"].get<long long>(), 7);
    const nlohmann::json& both = bodies.at(mixed);
    EXPECT_EQ(both, (nlohmann::json{{"completion_id", "c-124"}, {"user_id", 42}, {"mission_id", "mission-8"},
                                    {"solar_term", "HAJI"}}));
    EXPECT_TRUE(both["user_id"].is_number_integer());
    EXPECT_EQ(admin_.user_counts(), (std::map<std::string, long long>{{"42", 1}, {"9007199254740993", 1}}));
}

TEST_F(MissionLogForwarding, AnIdThatIsNeitherAnIntegerNorTextGoesToReviewWithoutACall) {
    std::vector<std::string> events;
    for (const char* id : {"1.5", "true", "\"\"", "null"}) {
        events.push_back(db_.scalar(std::string("SELECT outbox_publish('acme', 'MissionCompleted', '{\"completion_id\": ") +
                                    id + ", \"user_id\": 1, \"mission_id\": 2, \"solar_term\": \"HAJI\"}'::jsonb)::text"));
    }
    auto host = start_host(config());
    for (const auto& event : events) {
        ASSERT_TRUE(reaches(event, "REVIEW_REQUIRED")) << field(event, "status");
        EXPECT_EQ(field(event, "last_error_code"), "BAD_PAYLOAD");
    }
    EXPECT_EQ(admin_.call_count(), 0u);
}

TEST_F(MissionLogForwarding, AResponseLostAfterProcessingIsRetriedAndCountedOnce) {
    admin_.script({ScriptedResponse::of(Kind::LostDrop)});
    const auto mission = complete_mission(1);
    auto host = start_host(config(), 0ms);
    ASSERT_TRUE(reaches(mission.event_id, "COMPLETED")) << field(mission.event_id, "last_error_code");
    EXPECT_EQ(field(mission.event_id, "attempt_count"), "2");
    EXPECT_EQ(admin_.call_count(), 2u);
    EXPECT_EQ(admin_.total(), 1) << "the retry was answered from the idempotency store";
    EXPECT_EQ(admin_.replayed(), 1);
}

TEST_F(MissionLogForwarding, AnAnswerArrivingAfterTheTimeoutIsCountedOnceAcrossRetries) {
    // The first call is processed slowly and answered after the client gave up; retries
    // meanwhile find the key in progress (409) until it is done, then get the stored answer.
    // Answered after 3 s: retries come every ~0.8 s (timeout + backoff), so one lands
    // inside the slow call even when a loaded machine delays them by seconds.
    admin_.script({ScriptedResponse::of(Kind::Normal).after(3000ms)});
    const auto mission = complete_mission(2);
    auto host = start_host(config("400ms"), 400ms);  // 9 retries span more than the 3 s
    ASSERT_TRUE(reaches(mission.event_id, "COMPLETED", 20s)) << field(mission.event_id, "last_error_code");
    EXPECT_EQ(admin_.total(), 1);
    EXPECT_EQ(admin_.user_counts().at("2"), 1);
    EXPECT_GE(admin_.in_progress_conflicts(), 1) << "a retry overlapped the slow first call";
    EXPECT_GE(std::stoi(field(mission.event_id, "attempt_count")), 3);
}

struct FailureCase {
    std::string name;
    ScriptedResponse response;
    std::string status;  // the event's status afterwards
    std::string code;    // its last_error_code
    int min_retry_after_seconds = 0;
};

std::ostream& operator<<(std::ostream& out, const FailureCase& c) { return out << c.name; }

class MissionLogForwardingFailure : public MissionLogForwarding, public ::testing::WithParamInterface<FailureCase> {};

TEST_P(MissionLogForwardingFailure, EndsInTheDocumentedStateWithTheDocumentedCode) {
    const FailureCase& c = GetParam();
    admin_.script({c.response});
    const auto mission = complete_mission(3);
    auto host = start_host(config("1s"), c.min_retry_after_seconds > 0 ? 0ms : std::chrono::milliseconds{60s});
    ASSERT_TRUE(reaches(mission.event_id, c.status)) << "status " << field(mission.event_id, "status") << ", code "
                                                     << field(mission.event_id, "last_error_code");
    host->stop();
    EXPECT_EQ(field(mission.event_id, "last_error_code"), c.code);
    EXPECT_EQ(field(mission.event_id, "attempt_count"), "1");
    EXPECT_EQ(admin_.call_count(), 1u);
    if (c.min_retry_after_seconds > 0) {
        const double wait = std::stod(db_.scalar("SELECT extract(epoch FROM next_attempt_at) FROM event_publication")) -
                            epoch_seconds(admin_.calls().at(0).answered_wall);
        // 50ms: the host computes the delay a moment after the answer and the database
        // stores it relative to its own transaction time.
        EXPECT_GE(wait, c.min_retry_after_seconds - 0.05) << "next_attempt_at honours Retry-After";
        EXPECT_LE(wait, c.min_retry_after_seconds + 5.0);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Statuses, MissionLogForwardingFailure,
    ::testing::Values(
        FailureCase{"Http409IsRetryable", ScriptedResponse::answer(409), "RETRY_WAIT", "HTTP_409"},
        FailureCase{"Http429HonoursRetryAfter", ScriptedResponse::answer(429, "20"), "RETRY_WAIT", "HTTP_429", 20},
        FailureCase{"Http503HonoursRetryAfter", ScriptedResponse::answer(503, "25"), "RETRY_WAIT", "HTTP_503", 25},
        FailureCase{"Http500", ScriptedResponse::answer(500), "RETRY_WAIT", "HTTP_500"},
        FailureCase{"Http502", ScriptedResponse::answer(502), "RETRY_WAIT", "HTTP_502"},
        FailureCase{"Http503WithoutRetryAfter", ScriptedResponse::answer(503), "RETRY_WAIT", "HTTP_503"},
        FailureCase{"Http400", ScriptedResponse::answer(400), "REVIEW_REQUIRED", "HTTP_400"},
        FailureCase{"Http401", ScriptedResponse::answer(401), "REVIEW_REQUIRED", "HTTP_401"},
        FailureCase{"Http403", ScriptedResponse::answer(403), "REVIEW_REQUIRED", "HTTP_403"},
        FailureCase{"Http404", ScriptedResponse::answer(404), "REVIEW_REQUIRED", "HTTP_404"},
        FailureCase{"Http410", ScriptedResponse::answer(410), "REVIEW_REQUIRED", "HTTP_410"},
        FailureCase{"Http422", ScriptedResponse::answer(422), "REVIEW_REQUIRED", "HTTP_422"},
        FailureCase{"StallIsATimeout", ScriptedResponse::of(Kind::Timeout), "RETRY_WAIT", "TIMEOUT"},
        FailureCase{"LateAnswerIsATimeout", ScriptedResponse::of(Kind::LostLate), "RETRY_WAIT", "TIMEOUT"},
        FailureCase{"DroppedConnectionIsConnectionLost", ScriptedResponse::of(Kind::LostDrop), "RETRY_WAIT",
                    "CONNECTION_LOST"}),
    [](const ::testing::TestParamInfo<FailureCase>& info) { return info.param.name; });

TEST_F(MissionLogForwarding, RetryAfterDelaysTheNextCallByAtLeastThatLong) {
    admin_.script({ScriptedResponse::answer(503, "2")});
    const auto mission = complete_mission(4);
    auto host = start_host(config(), 0ms);
    ASSERT_TRUE(reaches(mission.event_id, "COMPLETED", 20s));
    const auto calls = admin_.calls();
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_GE(calls[1].arrived_wall - calls[0].answered_wall, 2s) << "the retry came before Retry-After allowed it";
    EXPECT_EQ(admin_.total(), 1);
}

TEST_F(MissionLogForwarding, TheHandlerDeadlineCapsALongerConfiguredTimeout) {
    stall_everything_for(10s);
    const auto mission = complete_mission(5);
    auto host = start_host(config("30s"), 60s, 800ms);
    ASSERT_TRUE(reaches(mission.event_id, "RETRY_WAIT", 10s));
    EXPECT_EQ(field(mission.event_id, "last_error_code"), "TIMEOUT");
    const double gave_up_after = std::stod(db_.scalar("SELECT extract(epoch FROM updated_at) FROM event_publication")) -
                                 epoch_seconds(admin_.calls().at(0).arrived_wall);
    // From the call's arrival at the fake to the stored outcome: 0.8 s less the request's own
    // delay (up to a few hundred ms on a loaded machine), plus the store. The stall answers
    // at 10 s, which is what a call the deadline did not end would take.
    EXPECT_LT(gave_up_after, 5.0) << "the 800ms handler deadline, not the 30s config timeout, bounds the call";
    EXPECT_GT(gave_up_after, 0.4);
}

TEST_F(MissionLogForwarding, TheConfiguredTimeoutAppliesWhenShorterThanTheDeadline) {
    stall_everything_for(10s);
    const auto mission = complete_mission(5);
    auto host = start_host(config("300ms"), 60s, 30s);
    ASSERT_TRUE(reaches(mission.event_id, "RETRY_WAIT", 10s));
    EXPECT_EQ(field(mission.event_id, "last_error_code"), "TIMEOUT");
    const double gave_up_after = std::stod(db_.scalar("SELECT extract(epoch FROM updated_at) FROM event_publication")) -
                                 epoch_seconds(admin_.calls().at(0).arrived_wall);
    // 0.3 s when right; 5 s allows a loaded machine, a call the timeout did not end takes 10.
    EXPECT_LT(gave_up_after, 5.0);
}

TEST_F(MissionLogForwarding, ARefusedConnectionIsRetryableConnectFailed) {
    int closed_port = 0;
    {
        AdminStatsServer gone;
        gone.start();
        closed_port = gone.port();
    }
    const auto mission = complete_mission(6);
    auto host = start_host({{"base_url", "http://127.0.0.1:" + std::to_string(closed_port)}});
    ASSERT_TRUE(reaches(mission.event_id, "RETRY_WAIT"));
    EXPECT_EQ(field(mission.event_id, "last_error_code"), "CONNECT_FAILED");
}

TEST_F(MissionLogForwarding, ABaseUrlPathPrefixIsKeptAndAWrongOneEndsInReview) {
    const auto mission = complete_mission(8);
    auto host = start_host({{"base_url", admin_.base_url() + "/gateway/"}});
    ASSERT_TRUE(reaches(mission.event_id, "REVIEW_REQUIRED"));
    EXPECT_EQ(field(mission.event_id, "last_error_code"), "HTTP_404") << "POST /gateway/api/stats/mission-log";
    EXPECT_EQ(admin_.total(), 0);
}

TEST_F(MissionLogForwarding, APayloadMissingAFieldGoesToReviewWithoutACall) {
    const std::string event = db_.scalar(
        "SELECT outbox_publish('acme', 'MissionCompleted', '{\"completion_id\": "
        "\"0b0e6f2a-8c1d-4d55-9a51-3f1f4c7a9e10\", \"user_id\": \"user-9\", \"mission_id\": \"mission-1\"}'::jsonb)::text");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(event, "REVIEW_REQUIRED"));
    EXPECT_EQ(field(event, "last_error_code"), "BAD_PAYLOAD");
    EXPECT_EQ(admin_.call_count(), 0u);
}

class MissionLogForwardingConfig : public ::testing::Test {
protected:
    void expect_refused(const nlohmann::json& config, const std::string& why) {
        plugin::PluginLoader loader(dir_.path());
        const auto result = loader.load_file(MISSION_LOG_FORWARDING_PLUGIN, {{"mission-log-forwarding", config.dump()}});
        const auto* rejected = std::get_if<plugin::RejectedPlugin>(&result);
        ASSERT_NE(rejected, nullptr) << why << ": " << config.dump();
        EXPECT_NE(rejected->reason.find("constructor threw"), std::string::npos) << rejected->reason;
    }
    TempDir dir_;
};

TEST_F(MissionLogForwardingConfig, LoadsWithAValidSection) {
    plugin::PluginLoader loader(dir_.path());
    const auto result = loader.load_file(MISSION_LOG_FORWARDING_PLUGIN,
                                         {{"mission-log-forwarding", R"({"base_url": "http://127.0.0.1:9", "timeout": 5})"}});
    ASSERT_TRUE(std::holds_alternative<plugin::LoadedPlugin>(result)) << std::get<plugin::RejectedPlugin>(result).reason;
    EXPECT_EQ(std::get<plugin::LoadedPlugin>(result).handler_name, "mission-log-forwarding");
    EXPECT_EQ(std::get<plugin::LoadedPlugin>(result).event_types, std::vector<std::string>{"MissionCompleted"});
}

TEST_F(MissionLogForwardingConfig, TheHostRefusesABadSection) {
    expect_refused(nlohmann::json::object(), "no base_url");
    expect_refused({{"base_url", "127.0.0.1:8082"}}, "no scheme");
    expect_refused({{"base_url", "http://user:pw@127.0.0.1:8082"}}, "credentials in the URL");
    expect_refused({{"base_url", "http://127.0.0.1:8082?x=1"}}, "query string");
    expect_refused({{"base_url", "http://127.0.0.1:8082"}, {"timeout", "-1s"}}, "negative timeout");
    expect_refused({{"base_url", "http://127.0.0.1:8082"}, {"timeout", "2h"}}, "timeout over an hour");
    expect_refused({{"base_url", "http://127.0.0.1:8082"}, {"endpoint", "x"}}, "unknown key");
}

}  // namespace
}  // namespace outbox::test
