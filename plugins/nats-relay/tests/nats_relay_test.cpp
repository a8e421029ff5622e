// nats-relay, loaded from its real .so by the real host runtime, against a real PostgreSQL
// and a real nats-server -js on 127.0.0.1: what it stores in the stream, that a message id
// already stored is not stored again, the state every refusal or outage leaves the event
// in, and `outboxd plugins check` on its configuration.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "nats_server.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kStream = "OUTBOX";

class NatsRelay : public ::testing::Test {
protected:
    void SetUp() override {
        nats_.start();
        client_ = std::make_unique<JetStreamClient>(nats_);
        client_->add_stream(kStream, {"outbox.acme.>"});
    }

    nlohmann::json config(const std::string& publish_timeout = "2s") const {
        return {{"servers", {nats_.url()}},
                {"stream", kStream},
                {"event_types", {"OrderPlaced"}},
                {"publish_timeout", publish_timeout}};
    }

    std::unique_ptr<TestHost> start_host(const nlohmann::json& plugin_config, std::chrono::milliseconds backoff = 60s,
                                         std::chrono::milliseconds handler_timeout = 5s) {
        auto options = fast_options(db_.url(), "nats-relay-test");
        options.initial_backoff = backoff;
        options.max_backoff = backoff;
        options.max_attempts = 10;
        auto host = std::make_unique<TestHost>(options, std::vector<std::string>{NATS_RELAY_PLUGIN},
                                               plugin::HandlerConfigs{{"nats-relay", plugin_config.dump()}},
                                               handler_timeout);
        host->start();
        return host;
    }

    /// `trace`: extra named arguments of outbox_publish(), e.g. ", traceparent => '...'".
    std::string publish(const std::string& company, const std::string& payload,
                        const std::string& aggregate_key = {}, const std::string& trace = {}) const {
        const std::string key = aggregate_key.empty() ? "NULL" : "'" + aggregate_key + "'";
        return db_.scalar("SELECT outbox_publish('" + company + "', 'OrderPlaced', '" + payload + "'::jsonb, " + key +
                          trace + ")::text");
    }
    std::string field(const std::string& event_id, const std::string& column) const {
        const auto rows = db_.exec("SELECT coalesce(" + column + "::text, '') FROM event_publication WHERE event_id = '" +
                                   event_id + "'");
        return rows.empty() ? "" : rows[0][0].as<std::string>();
    }
    bool reaches(const std::string& event_id, const std::string& status, std::chrono::milliseconds timeout = 15s) const {
        return wait_until([&] { return field(event_id, "status") == status; }, timeout);
    }

    TestDatabase db_;
    NatsServer nats_;
    std::unique_ptr<JetStreamClient> client_;
};

TEST_F(NatsRelay, StoresTheEventAsJsonOnTheTemplatedSubjectWithItsIdAsMessageId) {
    const std::string first = publish("acme", R"({"order_id": 9007199254740993, "total": 12.50, "note": "a\"b"})", "order-7");
    const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const std::string second = publish("acme", R"({"order_id": 9007199254740993, "total": 3})", "order-7",
                                       ", traceparent => '" + parent + "', tracestate => 'rojo=00f067aa0ba902b7'");
    const std::string unkeyed = publish("acme", R"({"order_id": 1})");
    auto host = start_host(config());
    for (const auto& id : {first, second, unkeyed}) {
        ASSERT_TRUE(reaches(id, "COMPLETED")) << field(id, "last_error_code");
    }
    const auto stored = client_->read_all(kStream, "outbox.>", 3, 10s);
    ASSERT_EQ(stored.size(), 3u);
    std::map<std::string, StoredMessage> by_id;
    for (const auto& message : stored) by_id[message.msg_id] = message;
    ASSERT_EQ(by_id.size(), 3u) << "one message per event id";
    const StoredMessage& one = by_id.at(first);
    EXPECT_EQ(one.subject, "outbox.acme.OrderPlaced");
    EXPECT_EQ(one.content_type, "application/json");
    const auto body = nlohmann::json::parse(one.body);
    EXPECT_EQ(body["id"], first);
    EXPECT_EQ(body["type"], "OrderPlaced");
    EXPECT_EQ(body["company"], "acme");
    EXPECT_EQ(body["aggregate_key"], "order-7");
    EXPECT_EQ(body["aggregate_position"], 1);
    EXPECT_EQ(body["payload"]["order_id"].get<long long>(), 9007199254740993LL) << "no detour through a double";
    EXPECT_EQ(body["payload"]["note"], "a\"b");
    EXPECT_EQ(body["occurred_at"].get<std::string>().back(), 'Z') << body.dump();
    EXPECT_EQ(body["occurred_at"].get<std::string>().substr(0, 19),
              db_.scalar("SELECT to_char(occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM "
                         "event_publication WHERE event_id = '" + first + "'"));
    EXPECT_EQ(nlohmann::json::parse(by_id.at(second).body)["aggregate_position"], 2);
    EXPECT_EQ(by_id.at(second).traceparent, parent) << "the publisher's trace context travels as headers";
    EXPECT_EQ(by_id.at(second).tracestate, "rojo=00f067aa0ba902b7");
    EXPECT_EQ(one.traceparent, "") << "none given, none sent";
    EXPECT_EQ(one.tracestate, "");
    EXPECT_LT(by_id.at(first).sequence, by_id.at(second).sequence) << "an aggregate's events are stored in publish order";
    const auto plain = nlohmann::json::parse(by_id.at(unkeyed).body);
    EXPECT_TRUE(plain["aggregate_key"].is_null());
    EXPECT_TRUE(plain["aggregate_position"].is_null());
    EXPECT_EQ(field(first, "attempt_count"), "1");
}

TEST_F(NatsRelay, AnEventWhoseIdIsAlreadyInTheStreamCompletesWithoutASecondMessage) {
    // As after a publish whose acknowledgement was lost: the stream has the message, the
    // event is delivered again.
    const std::string id = publish("acme", R"({"order_id": 1})");
    ASSERT_TRUE(client_->publish("outbox.acme.OrderPlaced", id, R"({"earlier":"copy"})"));
    auto host = start_host(config());
    ASSERT_TRUE(reaches(id, "COMPLETED")) << field(id, "last_error_code");
    EXPECT_EQ(client_->count(kStream), 1u);
    const auto stored = client_->read_all(kStream, "outbox.>", 1, 5s);
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(stored[0].body, R"({"earlier":"copy"})") << "the first copy stays; the redelivery is a no-op";
}

TEST_F(NatsRelay, ASubjectTheStreamDoesNotCoverGoesToReviewAtTheFirstAttempt) {
    const std::string id = publish("globex", R"({"order_id": 1})");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(id, "REVIEW_REQUIRED")) << field(id, "last_error_code");
    EXPECT_EQ(field(id, "last_error_code"), "NATS_SUBJECT_NOT_IN_STREAM");
    EXPECT_EQ(field(id, "attempt_count"), "1");
    EXPECT_EQ(client_->count(kStream), 0u);
}

TEST_F(NatsRelay, ASubjectAnotherStreamTakesGoesToReview) {
    client_->add_stream("OTHER", {"outbox.globex.>"});
    const std::string id = publish("globex", R"({"order_id": 1})");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(id, "REVIEW_REQUIRED")) << field(id, "last_error_code");
    EXPECT_EQ(field(id, "last_error_code"), "NATS_WRONG_STREAM");
    EXPECT_EQ(client_->count("OTHER"), 0u) << "the expected-stream check refuses before storing";
}

TEST_F(NatsRelay, AMessageOverTheStreamsMaximumSizeGoesToReview) {
    client_->add_stream("SMALL", {"small.>"}, 400);
    auto small = config();
    small["stream"] = "SMALL";
    small["subject_template"] = "small.<company>.<event_type>";
    const std::string big = publish("acme", R"({"note": ")" + std::string(600, 'x') + R"("})");
    const std::string fits = publish("acme", R"({"n": 1})");
    auto host = start_host(small);
    ASSERT_TRUE(reaches(big, "REVIEW_REQUIRED")) << field(big, "last_error_code");
    EXPECT_EQ(field(big, "last_error_code"), "NATS_MESSAGE_TOO_LARGE");
    ASSERT_TRUE(reaches(fits, "COMPLETED")) << field(fits, "last_error_code");
    EXPECT_EQ(client_->count("SMALL"), 1u);
}

TEST_F(NatsRelay, ACompanyIdThatCannotBeASubjectTokenGoesToReview) {
    const std::string id = publish("acme corp", R"({"order_id": 1})");
    auto host = start_host(config());
    ASSERT_TRUE(reaches(id, "REVIEW_REQUIRED")) << field(id, "last_error_code");
    EXPECT_EQ(field(id, "last_error_code"), "NATS_BAD_SUBJECT");
}

TEST_F(NatsRelay, WithTheServerDownTheEventWaitsAsConnectFailedAndIsStoredOnceItIsBack) {
    nats_.stop();
    const std::string id = publish("acme", R"({"order_id": 1})");
    auto host = start_host(config(), 300ms);
    ASSERT_TRUE(wait_until([&] { return field(id, "last_error_code") == "CONNECT_FAILED"; }, 10s))
        << field(id, "status") << " " << field(id, "last_error_code");
    EXPECT_NE(field(id, "status"), "COMPLETED");
    EXPECT_NE(field(id, "status"), "REVIEW_REQUIRED") << "a server outage is retryable";
    nats_.start();
    ASSERT_TRUE(reaches(id, "COMPLETED", 20s)) << field(id, "last_error_code");
    JetStreamClient after(nats_);
    EXPECT_EQ(after.count(kStream), 1u);
}

TEST_F(NatsRelay, NoAcknowledgementBeforeTheHandlerDeadlineIsARetryableTimeout) {
    // A responder that never answers: the publish finds it and waits for an ack that never
    // comes. publish_timeout is far longer than the handler's deadline, which must win.
    client_->silent_responder("outbox.slowco.>");
    auto slow = config("50s");
    const std::string id = publish("slowco", R"({"order_id": 1})");
    const auto started = std::chrono::steady_clock::now();
    auto host = start_host(slow, 60s, 700ms);
    ASSERT_TRUE(wait_until([&] { return field(id, "status") == "RETRY_WAIT"; }, 15s)) << field(id, "status");
    EXPECT_EQ(field(id, "last_error_code"), "TIMEOUT") << "not HANDLER_TIMEOUT: the publish kept to the deadline";
    EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
}

// `outboxd plugins check DIR --config FILE` constructs the plugin with its section: every
// bad configuration is refused, a good one is reported with its event types.
TEST(NatsRelayConfig, PluginsCheckRefusesEveryBadConfigurationAndAcceptsAGoodOne) {
    TempDir dir;
    const fs::path plugins = dir.path() / "plugins";
    fs::create_directory(plugins);
    fs::copy_file(NATS_RELAY_PLUGIN, plugins / "libnats_relay.so");
    const std::string creds = (dir.path() / "user.creds").string();
    std::ofstream(creds) << "-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n";
    const auto check = [&](const std::string& section) {
        const std::string file = (dir.path() / "outboxd.yaml").string();
        std::ofstream(file) << "handlers:\n  nats-relay:\n    config:\n" << section;
        return run_command({OUTBOXD_BINARY, "plugins", "check", plugins.string(), "--config", file},
                           {{"NATS_TEST_TOKEN", "s3cr3t-token-value"}, {"NATS_EMPTY_TOKEN", ""}}, 30s);
    };
    const std::string good = "      servers: [nats://127.0.0.1:4222, tls://nats.example:4443]\n"
                             "      stream: OUTBOX\n"
                             "      event_types: [OrderPlaced, OrderShipped]\n";
    {
        const auto [code, output] = check(good + "      token_env: NATS_TEST_TOKEN\n      publish_timeout: 3s\n");
        EXPECT_EQ(code, 0) << output;
        EXPECT_NE(output.find("OrderPlaced,OrderShipped"), std::string::npos) << output;
        EXPECT_EQ(output.find("s3cr3t"), std::string::npos) << "the token is never shown";
    }
    {
        const auto [code, output] = check(good + "      credentials_file: " + creds + "\n");
        EXPECT_EQ(code, 0) << output;
    }
    const std::vector<std::pair<std::string, std::string>> bad{
        {"no servers", "      stream: OUTBOX\n      event_types: [OrderPlaced]\n"},
        {"empty servers", "      servers: []\n      stream: OUTBOX\n      event_types: [OrderPlaced]\n"},
        {"http server", "      servers: [http://127.0.0.1:4222]\n      stream: OUTBOX\n      event_types: [OrderPlaced]\n"},
        {"credentials in URL",
         "      servers: [nats://user:pw@127.0.0.1:4222]\n      stream: OUTBOX\n      event_types: [OrderPlaced]\n"},
        {"no stream", "      servers: [nats://127.0.0.1:4222]\n      event_types: [OrderPlaced]\n"},
        {"bad stream", "      servers: [nats://127.0.0.1:4222]\n      stream: a.b\n      event_types: [OrderPlaced]\n"},
        {"no event types", "      servers: [nats://127.0.0.1:4222]\n      stream: OUTBOX\n"},
        {"bad event type", "      servers: [nats://127.0.0.1:4222]\n      stream: OUTBOX\n      event_types: [order-placed]\n"},
        {"unknown placeholder", good + "      subject_template: outbox.<tenant>.<event_type>\n"},
        {"wildcard template", good + "      subject_template: outbox.*.<event_type>\n"},
        {"empty token in template", good + "      subject_template: outbox..<event_type>\n"},
        {"bad timeout", good + "      publish_timeout: 5h\n"},
        {"zero timeout", good + "      publish_timeout: 0s\n"},
        {"unknown key", good + "      server: nats://127.0.0.1:4222\n"},
        {"unset token variable", good + "      token_env: NATS_UNSET_TOKEN_VARIABLE\n"},
        {"empty token variable", good + "      token_env: NATS_EMPTY_TOKEN\n"},
        {"missing credentials file", good + "      credentials_file: /nonexistent/user.creds\n"},
        {"token and credentials", good + "      token_env: NATS_TEST_TOKEN\n      credentials_file: " + creds + "\n"},
    };
    for (const auto& [name, section] : bad) {
        const auto [code, output] = check(section);
        EXPECT_NE(code, 0) << name << ": " << output;
        EXPECT_NE(output.find("nats_relay::InvalidConfig"), std::string::npos) << name << ": " << output;
    }
    // A token written into the file is refused by the host itself, naming token_env.
    const auto [code, output] = check(good + "      token: s3cr3t-token-value\n");
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("token_env"), std::string::npos) << output;
    EXPECT_EQ(output.find("s3cr3t"), std::string::npos) << output;
}

}  // namespace
}  // namespace outbox::test
