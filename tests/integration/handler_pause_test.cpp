// Pausing a handler fleet-wide (`outboxd handlers pause|resume`, outbox_handler_pause): two
// hosts stop calling it at once (NOTIFY, with a poll interval far longer than the test),
// its events wait without using attempts, the pause survives host restarts, and a resume
// lets every event complete.
#include <gtest/gtest.h>

#include <pqxx/pqxx>

#include "operations/handler_pause.hpp"
#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;

class HandlerPause : public ::testing::Test {
protected:
    void SetUp() override { create_scripted_effect_table(db_.url()); }

    std::unique_ptr<TestHost> start_host(const std::string& id) {
        auto options = fast_options(db_.url(), id);
        // Far beyond the test's waits: what the hosts learn, they learn through NOTIFY.
        options.poll_interval = 60s;
        auto host = std::make_unique<TestHost>(
            options, std::vector<std::string>{OUTBOX_FIXTURE_SCRIPTED, OUTBOX_FIXTURE_SCRIPTED_B, OUTBOX_FIXTURE_GOOD_ECHO});
        host->start();
        return host;
    }
    bool set_paused(bool paused) {
        pqxx::connection conn(db_.url());
        return operations::set_handler_paused(conn, "scripted-b", paused, "cli:test", "cli");
    }
    long long count(const std::string& sql) const { return std::stoll(db_.scalar(sql)); }
    bool all_know(const std::vector<std::unique_ptr<TestHost>>& hosts, bool paused) {
        return wait_until(
            [&] {
                for (const auto& host : hosts) {
                    if (host->runtime().paused_handlers().contains("scripted-b") != paused) return false;
                }
                return true;
            },
            10s);
    }
    // An event only the unpaused echo handler runs: once it completed, both hosts have
    // claimed after the pause.
    void prove_hosts_claim() {
        const auto echo = publish_many(db_.url(), "EchoRequested", "{}", 4);
        ASSERT_TRUE(wait_until(
            [&] { return count("SELECT count(*) FROM event_publication WHERE event_type = 'EchoRequested' AND status <> 'COMPLETED'") == 0; },
            30s));
    }
    void expect_untouched(const std::vector<std::string>& ids) {
        for (const auto& id : ids) {
            EXPECT_EQ(db_.scalar("SELECT status || '/' || attempt_count || '/' || version FROM event_publication "
                                 "WHERE event_id = '" + id + "'"),
                      "PENDING/0/1");
        }
        EXPECT_EQ(count("SELECT count(*) FROM scripted_effect"), 0) << "no handler of a paused event ran";
    }

    TestDatabase db_;
};

TEST_F(HandlerPause, PausedHandlerIsNotCalledOnAnyHostAndResumeCompletesItsEvents) {
    std::vector<std::unique_ptr<TestHost>> hosts;
    hosts.push_back(start_host("host-a"));
    hosts.push_back(start_host("host-b"));
    ASSERT_TRUE(set_paused(true));
    ASSERT_TRUE(all_know(hosts, true)) << "NOTIFY reaches every host";

    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "b_db": true})", 30);
    prove_hosts_claim();
    expect_untouched(ids);
    for (const auto& host : hosts) {
        for (const auto& [key, calls] : host->metrics().handler_calls()) {
            EXPECT_NE(key.first, "scripted-b") << "no call of the paused handler";
            EXPECT_NE(key.first, "scripted") << "nor of the other handlers of its events";
        }
    }

    ASSERT_TRUE(set_paused(false));
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE event_type = 'TestRequested' AND status = 'COMPLETED'") == 30; },
        60s));
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'scripted-b'"), 30);
    EXPECT_EQ(count("SELECT count(*) FROM scripted_effect WHERE handler_name = 'scripted'"), 30);
    EXPECT_EQ(count("SELECT max(attempt_count) FROM event_publication WHERE event_type = 'TestRequested'"), 1)
        << "waiting used no attempt";
    for (auto& host : hosts) EXPECT_TRUE(host->stop());
}

TEST_F(HandlerPause, PauseSurvivesHostRestartsAndIsIdempotent) {
    ASSERT_TRUE(set_paused(true));
    EXPECT_FALSE(set_paused(true)) << "pausing a paused handler changes nothing";
    EXPECT_EQ(count("SELECT count(*) FROM audit_event WHERE action = 'outbox.handler_paused' AND target_id = 'scripted-b'"), 1);
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "b_db": true})", 10);
    {
        std::vector<std::unique_ptr<TestHost>> hosts;
        hosts.push_back(start_host("host-a"));
        hosts.push_back(start_host("host-b"));
        ASSERT_TRUE(all_know(hosts, true)) << "read from the database at start-up";
        prove_hosts_claim();
        expect_untouched(ids);
        for (auto& host : hosts) EXPECT_TRUE(host->stop());
    }
    std::vector<std::unique_ptr<TestHost>> hosts;
    hosts.push_back(start_host("host-c"));
    hosts.push_back(start_host("host-d"));
    prove_hosts_claim();
    expect_untouched(ids);

    ASSERT_TRUE(set_paused(false));
    EXPECT_FALSE(set_paused(false)) << "resuming a running handler changes nothing";
    ASSERT_TRUE(wait_until(
        [&] { return count("SELECT count(*) FROM event_publication WHERE event_type = 'TestRequested' AND status = 'COMPLETED'") == 10; },
        60s));
    for (auto& host : hosts) EXPECT_TRUE(host->stop());
}

TEST_F(HandlerPause, CommandLinePausesResumesAndShowsTheStateInStatus) {
    const std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db_.url()}};
    auto [code, out] = run_command({OUTBOXD_BINARY, "handlers", "pause", "scripted-b"}, env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("handler scripted-b paused on every host"), std::string::npos) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "handlers", "pause", "scripted-b"}, env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("was already paused; nothing changed"), std::string::npos) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "status"}, env);
    EXPECT_EQ(code, 0) << out;
    const auto section = out.find("PAUSED HANDLERS");
    ASSERT_NE(section, std::string::npos) << out;
    EXPECT_NE(out.find("scripted-b", section), std::string::npos) << out;
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "handlers", "resume", "scripted-b"}, env);
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("handler scripted-b resumed on every host"), std::string::npos) << out;
    EXPECT_EQ(count("SELECT count(*) FROM outbox_handler_pause"), 0);
    std::tie(code, out) = run_command({OUTBOXD_BINARY, "handlers", "pause", "Bad Name"}, env);
    EXPECT_EQ(code, 2) << out;
}

TEST_F(HandlerPause, StatusEscapesWhatTheDatabaseHolds) {
    // An API actor is a token's sub, and host ids come from each host's configuration.
    {
        pqxx::connection conn{db_.url()};
        pqxx::work tx{conn};
        tx.exec0("INSERT INTO outbox_handler_pause (handler_name, paused_by) VALUES ('scripted-b', "
                 "'api:' || chr(27) || '[2J' || chr(10) || 'FAKE LINE')");
        tx.exec0("INSERT INTO outbox_host (host_id, version, started_at, heartbeat_interval_ms, enabled) "
                 "VALUES ('evil' || chr(27) || ']0;title' || chr(7), '0.2.0', now(), 1000, true)");
        tx.commit();
    }
    const auto [code, out] = run_command({OUTBOXD_BINARY, "status"}, {{"OUTBOX_DATABASE_URL", db_.url()}});
    EXPECT_EQ(code, 0) << out;
    EXPECT_EQ(out.find('\x1b'), std::string::npos) << "no raw escape reaches the terminal";
    EXPECT_EQ(out.find('\x07'), std::string::npos);
    EXPECT_EQ(out.find("\nFAKE LINE"), std::string::npos) << out;
    EXPECT_NE(out.find("api:\\x1b[2J\\nFAKE LINE"), std::string::npos) << out;
    EXPECT_NE(out.find("evil\\x1b]0;title\\x07"), std::string::npos) << out;
}

}  // namespace
}  // namespace outbox::test
