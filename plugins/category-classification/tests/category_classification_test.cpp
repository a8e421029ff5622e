// category-classification, loaded from its real .so by the real host runtime, against a
// real PostgreSQL and the example AI classifier on 127.0.0.1: what it sends, and the state
// every answer (or missing answer) leaves the event in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include <pqxx/pqxx>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "outbox_examples/ai_classifier_server.hpp"
#include "plugin/plugin_loader.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
using examples::AiClassifierServer;
using examples::ScriptedResponse;
using Kind = ScriptedResponse::Kind;

constexpr const char* kKeyVariable = "SAMPLE_TEST_CLASSIFIER_KEY";
constexpr const char* kKey = "test-key-7c1e";

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    if (text.str().empty()) throw std::runtime_error("cannot read " + path);
    return text.str();
}

std::string http_date(std::chrono::system_clock::time_point when) {
    const std::time_t t = std::chrono::system_clock::to_time_t(when);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[64];
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    return text;
}

double epoch_seconds(std::chrono::system_clock::time_point when) {
    return std::chrono::duration<double>(when.time_since_epoch()).count();
}

class CategoryClassification : public ::testing::Test {
protected:
    void SetUp() override {
        ::setenv(kKeyVariable, kKey, 1);
        db_.exec(read_text(std::string(OUTBOX_EXAMPLES_DIR) + "/schema.sql"));
        classifier_.start();
    }

    nlohmann::json config(const std::string& timeout = "2s") const {
        return {{"endpoint", classifier_.base_url() + "/v1/classify"}, {"api_key_env", kKeyVariable}, {"timeout", timeout}};
    }

    // backoff: the host's retry delay, long by default so a failed event stays put.
    std::unique_ptr<TestHost> start_host(const nlohmann::json& plugin_config, std::chrono::milliseconds backoff = 60s,
                                         std::chrono::milliseconds handler_timeout = 5s) {
        auto options = fast_options(db_.url(), "classification-test");
        options.initial_backoff = backoff;
        options.max_backoff = backoff;
        auto host = std::make_unique<TestHost>(options, std::vector<std::string>{CATEGORY_CLASSIFICATION_PLUGIN},
                                               plugin::HandlerConfigs{{"category-classification", plugin_config.dump()}},
                                               handler_timeout);
        host->start();
        return host;
    }

    struct Registered {
        std::string website_id;
        std::string event_id;
    };
    Registered register_website(const std::string& domain, const char* category = nullptr) const {
        pqxx::connection conn(db_.url());
        pqxx::work tx(conn);
        const auto id = tx.exec_params("INSERT INTO website (domain, category) VALUES ($1, $2) RETURNING id::text",
                                       domain, category)[0][0]
                            .as<std::string>();
        const auto event = tx.exec_params("SELECT outbox_publish('acme', 'WebsiteRegistered', "
                                          "jsonb_build_object('website_id', $1::text, 'domain', $2::text), NULL, $1)::text",
                                          id, domain)[0][0]
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
    std::string category_of(const std::string& website_id) const {
        return db_.scalar("SELECT coalesce(category, '<null>') FROM website WHERE id = '" + website_id + "'");
    }

    void stall_everything_for(std::chrono::milliseconds stall) {
        examples::FaultConfig faults;
        faults.rate_timeout = 1.0;
        faults.stall = stall;
        classifier_.set_faults(faults);
    }

    TestDatabase db_;
    AiClassifierServer classifier_{kKey};
};

TEST_F(CategoryClassification, ClassifiesWithTheBearerKeyFromItsVariableAndTheEventIdAsIdempotencyKey) {
    const auto site = register_website("shop.example.com");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(site.event_id, "COMPLETED")) << field(site.event_id, "last_error_code");
    EXPECT_EQ(category_of(site.website_id), AiClassifierServer::category_for("shop.example.com"));
    const auto calls = classifier_.calls();
    ASSERT_EQ(calls.size(), 1u);
    EXPECT_EQ(calls[0].idempotency_key, site.event_id);
    EXPECT_EQ(calls[0].authorization, std::string("Bearer ") + kKey);
    EXPECT_EQ(nlohmann::json::parse(calls[0].body), (nlohmann::json{{"domain", "shop.example.com"}}))
        << "only the domain leaves the database";
    EXPECT_EQ(field(site.event_id, "attempt_count"), "1");
}

TEST_F(CategoryClassification, AWebsiteThatAlreadyHasACategoryCompletesWithoutCallingTheClassifier) {
    const auto log = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(512);
    spdlog::default_logger()->sinks().push_back(log);
    const auto site = register_website("curated.example.com", "hand-picked");
    auto host = start_host(config());
    const bool completed = reaches(site.event_id, "COMPLETED");
    host->stop();
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log), sinks.end());
    ASSERT_TRUE(completed) << field(site.event_id, "last_error_code");
    EXPECT_EQ(classifier_.call_count(), 0u) << "a classified website costs no classifier call";
    EXPECT_EQ(category_of(site.website_id), "hand-picked");
    // Completed in its first attempt: the status records the consumption, no row does.
    EXPECT_EQ(field(site.event_id, "attempt_count"), "1");
    EXPECT_EQ(db_.scalar("SELECT count(*) FROM event_consumption"), "0");
    bool logged = false;
    for (const auto& line : log->last_formatted()) {
        logged = logged || (line.find("already classified") != std::string::npos &&
                            line.find(site.event_id) != std::string::npos);
    }
    EXPECT_TRUE(logged) << "one log line through ctx.log, tagged with the event";
}

TEST_F(CategoryClassification, AWebsiteDeletedBeforeItsJobCompletesWithoutCallingTheClassifier) {
    const auto site = register_website("gone.example.com");
    db_.exec("DELETE FROM website WHERE id = '" + site.website_id + "'");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(site.event_id, "COMPLETED")) << field(site.event_id, "last_error_code");
    EXPECT_EQ(classifier_.call_count(), 0u);
}

TEST_F(CategoryClassification, ACategorySetWhileTheClassifierIsCalledIsNotOverwritten) {
    // The category arrives between the plugin's read and its update: the test has the 3 s
    // the answer is held to write it, milliseconds when unloaded.
    classifier_.script({ScriptedResponse::of(Kind::Normal).after(3000ms)});
    const auto site = register_website("contested.example.com");
    auto host = start_host(config("5s"));
    ASSERT_TRUE(wait_until([&] { return classifier_.call_count() == 1; }, 10s));
    db_.exec("UPDATE website SET category = 'hand-picked' WHERE id = '" + site.website_id + "'");
    ASSERT_TRUE(reaches(site.event_id, "COMPLETED")) << field(site.event_id, "last_error_code");
    EXPECT_EQ(category_of(site.website_id), "hand-picked") << "UPDATE ... WHERE category IS NULL never overwrites";
}

TEST_F(CategoryClassification, EventuallyClassifiesOnceAfterTransientFailuresWithTheSameKey) {
    classifier_.script({ScriptedResponse::answer(503), ScriptedResponse::answer(500),
                        ScriptedResponse::of(Kind::LostDrop)});
    const auto site = register_website("flaky.example.com");
    auto host = start_host(config(), 0ms);
    ASSERT_TRUE(reaches(site.event_id, "COMPLETED", 20s)) << field(site.event_id, "last_error_code");
    EXPECT_EQ(field(site.event_id, "attempt_count"), "4");
    EXPECT_EQ(category_of(site.website_id), AiClassifierServer::category_for("flaky.example.com"));
    const auto calls = classifier_.calls();
    ASSERT_EQ(calls.size(), 4u);
    for (const auto& call : calls) EXPECT_EQ(call.idempotency_key, site.event_id) << "a retry reuses the key";
    EXPECT_EQ(db_.scalar("SELECT count(*) FROM event_consumption"), "1");
}

struct FailureCase {
    std::string name;
    ScriptedResponse response;
    std::string status;  // the event's status afterwards
    std::string code;    // its last_error_code
    int min_retry_after_seconds = 0;
};

std::ostream& operator<<(std::ostream& out, const FailureCase& c) { return out << c.name; }

class CategoryClassificationFailure : public CategoryClassification,
                                      public ::testing::WithParamInterface<FailureCase> {};

TEST_P(CategoryClassificationFailure, EndsInTheDocumentedStateWithTheDocumentedCode) {
    const FailureCase& c = GetParam();
    ScriptedResponse response = c.response;
    if (response.retry_after && *response.retry_after == "http-date+40s") {
        response.retry_after = http_date(std::chrono::system_clock::now() + 40s);
    }
    classifier_.script({response});
    const auto site = register_website("case.example.com");
    // A Retry-After must be what delays the event, so the host's own backoff is zero then.
    auto host = start_host(config("1s"), c.min_retry_after_seconds > 0 ? 0ms : std::chrono::milliseconds{60s});
    ASSERT_TRUE(reaches(site.event_id, c.status)) << "status " << field(site.event_id, "status") << ", code "
                                                  << field(site.event_id, "last_error_code");
    host->stop();
    EXPECT_EQ(field(site.event_id, "last_error_code"), c.code);
    EXPECT_EQ(field(site.event_id, "attempt_count"), "1");
    EXPECT_EQ(category_of(site.website_id), "<null>");
    EXPECT_EQ(classifier_.call_count(), 1u);
    if (c.min_retry_after_seconds > 0) {
        const double wait = std::stod(
            db_.scalar("SELECT extract(epoch FROM next_attempt_at) FROM event_publication WHERE event_id = '" +
                       site.event_id + "'")) -
                            epoch_seconds(classifier_.calls().at(0).answered_wall);
        // 50ms: the host computes the delay a moment after the answer and the database
        // stores it relative to its own transaction time.
        EXPECT_GE(wait, c.min_retry_after_seconds - 0.05) << "next_attempt_at honours Retry-After";
        EXPECT_LE(wait, c.min_retry_after_seconds + 5.0);
    }
}

ScriptedResponse status(int code, std::optional<std::string> retry_after = std::nullopt) {
    return ScriptedResponse::answer(code, std::move(retry_after));
}

INSTANTIATE_TEST_SUITE_P(
    Statuses, CategoryClassificationFailure,
    ::testing::Values(
        FailureCase{"Http429HonoursRetryAfterSeconds", status(429, "30"), "RETRY_WAIT", "HTTP_429", 30},
        FailureCase{"Http503HonoursRetryAfterSeconds", status(503, "30"), "RETRY_WAIT", "HTTP_503", 30},
        FailureCase{"Http503HonoursRetryAfterHttpDate", status(503, "http-date+40s"), "RETRY_WAIT", "HTTP_503", 38},
        FailureCase{"Http429WithoutRetryAfter", status(429), "RETRY_WAIT", "HTTP_429"},
        FailureCase{"Http500", status(500), "RETRY_WAIT", "HTTP_500"},
        FailureCase{"Http502", status(502), "RETRY_WAIT", "HTTP_502"},
        FailureCase{"Http504", status(504), "RETRY_WAIT", "HTTP_504"},
        FailureCase{"Http408", status(408), "RETRY_WAIT", "HTTP_408"},
        FailureCase{"Http409", status(409), "RETRY_WAIT", "HTTP_409"},
        FailureCase{"Http400", status(400), "REVIEW_REQUIRED", "HTTP_400"},
        FailureCase{"Http401", status(401), "REVIEW_REQUIRED", "HTTP_401"},
        FailureCase{"Http403", status(403), "REVIEW_REQUIRED", "HTTP_403"},
        FailureCase{"Http404", status(404), "REVIEW_REQUIRED", "HTTP_404"},
        FailureCase{"Http422", status(422), "REVIEW_REQUIRED", "HTTP_422"},
        FailureCase{"InvalidJsonIsABadResponse", ScriptedResponse::answer_body(200, "<html>oops</html>"),
                    "RETRY_WAIT", "BAD_RESPONSE"},
        FailureCase{"NoCategoryIsABadResponse", ScriptedResponse::answer_body(200, R"({"category": 7})"),
                    "RETRY_WAIT", "BAD_RESPONSE"},
        FailureCase{"DroppedConnectionIsConnectionLost", ScriptedResponse::of(Kind::LostDrop), "RETRY_WAIT", "CONNECTION_LOST"},
        FailureCase{"StallIsATimeout", ScriptedResponse::of(Kind::Timeout), "RETRY_WAIT", "TIMEOUT"}),
    [](const ::testing::TestParamInfo<FailureCase>& info) { return info.param.name; });

TEST_F(CategoryClassification, RetryAfterDelaysTheNextCallByAtLeastThatLong) {
    classifier_.script({status(429, "2")});
    const auto site = register_website("patient.example.com");
    auto host = start_host(config(), 0ms);
    ASSERT_TRUE(reaches(site.event_id, "COMPLETED", 20s));
    const auto calls = classifier_.calls();
    ASSERT_EQ(calls.size(), 2u);
    EXPECT_GE(calls[1].arrived_wall - calls[0].answered_wall, 2s) << "the retry came before Retry-After allowed it";
    EXPECT_EQ(field(site.event_id, "attempt_count"), "2");
}

TEST_F(CategoryClassification, TheHandlerDeadlineCapsALongerConfiguredTimeout) {
    stall_everything_for(10s);
    const auto site = register_website("slow.example.com");
    auto host = start_host(config("30s"), 60s, 800ms);
    ASSERT_TRUE(reaches(site.event_id, "RETRY_WAIT", 10s));
    EXPECT_EQ(field(site.event_id, "last_error_code"), "TIMEOUT");
    const double gave_up_after =
        std::stod(db_.scalar("SELECT extract(epoch FROM updated_at) FROM event_publication")) -
        epoch_seconds(classifier_.calls().at(0).arrived_wall);
    // From the call's arrival at the fake to the stored outcome: 0.8 s less the request's own
    // delay (up to a few hundred ms on a loaded machine), plus the store. The stall answers
    // at 10 s, which is what a call the deadline did not end would take.
    EXPECT_LT(gave_up_after, 5.0) << "the 800ms handler deadline, not the 30s config timeout, bounds the call";
    EXPECT_GT(gave_up_after, 0.4);
}

TEST_F(CategoryClassification, TheConfiguredTimeoutAppliesWhenShorterThanTheDeadline) {
    stall_everything_for(10s);
    const auto site = register_website("slow.example.com");
    auto host = start_host(config("300ms"), 60s, 30s);
    ASSERT_TRUE(reaches(site.event_id, "RETRY_WAIT", 10s));
    EXPECT_EQ(field(site.event_id, "last_error_code"), "TIMEOUT");
    const double gave_up_after =
        std::stod(db_.scalar("SELECT extract(epoch FROM updated_at) FROM event_publication")) -
        epoch_seconds(classifier_.calls().at(0).arrived_wall);
    // 0.3 s when right; 5 s allows a loaded machine, a call the timeout did not end takes 10.
    EXPECT_LT(gave_up_after, 5.0);
}

TEST_F(CategoryClassification, ARefusedConnectionIsRetryableConnectFailed) {
    int closed_port = 0;
    {
        AiClassifierServer gone(kKey);
        gone.start();
        closed_port = gone.port();
    }
    auto plugin_config = config();
    plugin_config["endpoint"] = "http://127.0.0.1:" + std::to_string(closed_port) + "/v1/classify";
    const auto site = register_website("unreachable.example.com");
    auto host = start_host(plugin_config);
    ASSERT_TRUE(reaches(site.event_id, "RETRY_WAIT"));
    EXPECT_EQ(field(site.event_id, "last_error_code"), "CONNECT_FAILED");
}

TEST_F(CategoryClassification, AWrongKeyIsRefusedByTheClassifierAndGoesToReview) {
    ::setenv(kKeyVariable, "not-the-key", 1);
    const auto site = register_website("locked.example.com");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(site.event_id, "REVIEW_REQUIRED"));
    EXPECT_EQ(field(site.event_id, "last_error_code"), "HTTP_401");
    EXPECT_EQ(classifier_.calls().at(0).authorization, "Bearer not-the-key");
}

TEST_F(CategoryClassification, APayloadWithoutAUsableDomainGoesToReviewWithoutACall) {
    const std::string event = db_.scalar(
        "SELECT outbox_publish('acme', 'WebsiteRegistered', "
        "'{\"website_id\": \"0b0e6f2a-8c1d-4d55-9a51-3f1f4c7a9e10\"}'::jsonb)::text");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(event, "REVIEW_REQUIRED"));
    EXPECT_EQ(field(event, "last_error_code"), "BAD_PAYLOAD");
    EXPECT_EQ(classifier_.call_count(), 0u);
}

class CategoryClassificationConfig : public ::testing::Test {
protected:
    plugin::LoadResult load(const std::string& config_json) {
        plugin::PluginLoader loader(dir_.path());
        return loader.load_file(CATEGORY_CLASSIFICATION_PLUGIN, {{"category-classification", config_json}});
    }
    void expect_refused(const nlohmann::json& config, const std::string& why) {
        const auto result = load(config.dump());
        const auto* rejected = std::get_if<plugin::RejectedPlugin>(&result);
        ASSERT_NE(rejected, nullptr) << why << ": " << config.dump();
        EXPECT_NE(rejected->reason.find("constructor threw"), std::string::npos) << rejected->reason;
    }
    TempDir dir_;
};

TEST_F(CategoryClassificationConfig, LoadsWithAValidSection) {
    ::setenv(kKeyVariable, kKey, 1);
    const auto result = load(R"({"endpoint": "http://127.0.0.1:9/v1/classify", "api_key_env": ")" +
                             std::string(kKeyVariable) + R"(", "timeout": "10s"})");
    ASSERT_TRUE(std::holds_alternative<plugin::LoadedPlugin>(result)) << std::get<plugin::RejectedPlugin>(result).reason;
    EXPECT_EQ(std::get<plugin::LoadedPlugin>(result).handler_name, "category-classification");
    EXPECT_EQ(std::get<plugin::LoadedPlugin>(result).event_types, std::vector<std::string>{"WebsiteRegistered"});
}

TEST_F(CategoryClassificationConfig, TheHostRefusesThePluginWhenTheKeyVariableIsMissingOrEmpty) {
    const nlohmann::json config{{"endpoint", "http://127.0.0.1:9/v1/classify"}, {"api_key_env", "SAMPLE_TEST_UNSET_KEY"}};
    ::unsetenv("SAMPLE_TEST_UNSET_KEY");
    expect_refused(config, "unset variable");
    ::setenv("SAMPLE_TEST_UNSET_KEY", "", 1);
    expect_refused(config, "empty variable");
    ::unsetenv("SAMPLE_TEST_UNSET_KEY");
}

TEST_F(CategoryClassificationConfig, TheHostRefusesABadSection) {
    ::setenv(kKeyVariable, kKey, 1);
    const nlohmann::json good{{"endpoint", "http://127.0.0.1:9/v1/classify"}, {"api_key_env", kKeyVariable}};
    auto without_endpoint = good;
    without_endpoint.erase("endpoint");
    expect_refused(without_endpoint, "no endpoint");
    auto without_variable = good;
    without_variable.erase("api_key_env");
    expect_refused(without_variable, "no api_key_env");
    auto not_http = good;
    not_http["endpoint"] = "ftp://127.0.0.1/v1/classify";
    expect_refused(not_http, "not http");
    auto bad_port = good;
    bad_port["endpoint"] = "http://127.0.0.1:99999/v1/classify";
    expect_refused(bad_port, "bad port");
    auto bad_timeout = good;
    bad_timeout["timeout"] = "soon";
    expect_refused(bad_timeout, "bad timeout");
    auto zero_timeout = good;
    zero_timeout["timeout"] = "0s";
    expect_refused(zero_timeout, "zero timeout");
    auto unknown_key = good;
    unknown_key["retries"] = 3;
    expect_refused(unknown_key, "unknown key");
}

}  // namespace
}  // namespace outbox::test
