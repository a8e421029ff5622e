// One host id, one live process (review F5): a second `outboxd run` under the id of a live
// host refuses to start, and a process restarted under its id after a crash starts and
// leaves the crashed process's leases to the rescuer.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>

#include <pqxx/pqxx>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::map<std::string, std::string> identity_env(const std::string& url, const fs::path& plugins, const std::string& lease) {
    auto env = outboxd_env(url, plugins);
    env["OUTBOX_HOST_ID"] = "shared-id";
    env["OUTBOX_LEASE_DURATION"] = lease;
    return env;
}

// A database with the scripted fixture's effect table, a plugin directory holding the
// scripted plugin, and hosts started under the id "shared-id".
class HostIdentityE2E : public ::testing::Test {
protected:
    HostIdentityE2E() : plugins_(scripted_plugin_dir(dir_.path())) { create_scripted_effect_table(db_.url()); }

    [[nodiscard]] std::map<std::string, std::string> env(const std::string& lease) const {
        return identity_env(db_.url(), plugins_, lease);
    }
    [[nodiscard]] std::string log_path(const std::string& name) const { return (dir_.path() / (name + ".log")).string(); }
    /// `outboxd run` as host "shared-id", once it has logged its start.
    std::unique_ptr<ChildProcess> started_host(const std::string& log, const std::string& lease) const {
        auto host = std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run"}, env(lease), log);
        EXPECT_TRUE(wait_until([&] { return read_file(log).find("started as shared-id") != std::string::npos; }, 20s))
            << read_file(log);
        // Its row is written before it says it started, so a process started next finds it.
        EXPECT_EQ(db_.scalar("SELECT count(*) FROM outbox_host WHERE host_id = 'shared-id' AND stopped_at IS NULL"), "1");
        return host;
    }

    TestDatabase db_;
    TempDir dir_;
    fs::path plugins_;
};

TEST_F(HostIdentityE2E, ASecondProcessUnderTheIdOfALiveHostRefusesToStartWithExitTwo) {
    const std::string first_log = log_path("first");
    // A 6 s lease heartbeats every 2 s: the second process watches 4 s for the beat to move.
    const auto first = started_host(first_log, "6s");
    ASSERT_FALSE(::testing::Test::HasFailure());

    const auto [code, output] = run_command({OUTBOXD_BINARY, "run"}, env("6s"), 30s);
    EXPECT_EQ(code, 2) << output;
    EXPECT_NE(output.find("another outboxd process is running as host id 'shared-id'"), std::string::npos) << output;
    EXPECT_EQ(output.find("started as"), std::string::npos) << "it never started: " << output;

    // The first host was not disturbed.
    publish_many(db_.url(), "TestRequested", R"({"db": true})", 3);
    EXPECT_TRUE(wait_until([&] {
        return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "3";
    }, 15s));
    first->signal(SIGTERM);
    EXPECT_EQ(first->wait(20s), std::optional<int>(0));
}

// Two processes started at one moment both find no row; the second to write it is refused.
TEST_F(HostIdentityE2E, OfTwoProcessesStartedAtOneMomentUnderOneIdOnlyOneStarts) {
    const std::string refusal = "another outboxd process is running as host id 'shared-id'";
    const std::vector<std::string> logs{log_path("a"), log_path("b")};
    ChildProcess a({OUTBOXD_BINARY, "run"}, env("6s"), logs[0]);
    ChildProcess b({OUTBOXD_BINARY, "run"}, env("6s"), logs[1]);
    const auto settled = [&](const std::string& log) {
        const std::string text = read_file(log);
        return text.find("started as shared-id") != std::string::npos || text.find(refusal) != std::string::npos;
    };
    ASSERT_TRUE(wait_until([&] { return settled(logs[0]) && settled(logs[1]); }, 30s))
        << read_file(logs[0]) << "\n" << read_file(logs[1]);
    const bool a_refused = read_file(logs[0]).find(refusal) != std::string::npos;
    ChildProcess& refused = a_refused ? a : b;
    ChildProcess& started = a_refused ? b : a;
    const std::string& refused_log = logs[a_refused ? 0 : 1];
    const std::string& started_log = logs[a_refused ? 1 : 0];
    EXPECT_EQ(refused.wait(20s), std::optional<int>(2)) << read_file(refused_log);
    EXPECT_EQ(read_file(refused_log).find("started as"), std::string::npos) << read_file(refused_log);
    EXPECT_NE(read_file(started_log).find("started as shared-id"), std::string::npos) << read_file(started_log);
    EXPECT_EQ(read_file(started_log).find(refusal), std::string::npos) << read_file(started_log);
    // The one that started keeps its row and works.
    publish_many(db_.url(), "TestRequested", R"({"db": true})", 2);
    EXPECT_TRUE(wait_until([&] {
        return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "2";
    }, 15s));
    EXPECT_EQ(db_.scalar("SELECT count(*) FROM outbox_host WHERE host_id = 'shared-id' AND stopped_at IS NULL"), "1");
    started.signal(SIGTERM);
    EXPECT_EQ(started.wait(20s), std::optional<int>(0)) << read_file(started_log);
}

// A connection lost while the start-up checks run (a pooler or the server restarting) is
// waited out as an unreachable database is: the host starts over, then starts.
TEST_F(HostIdentityE2E, AConnectionLostDuringTheStartUpChecksIsWaitedOutAndTheHostStarts) {
    const std::string first_log = log_path("first");
    const auto first = started_host(first_log, "6s");
    ASSERT_FALSE(::testing::Test::HasFailure());
    ASSERT_TRUE(wait_until([&] {
        return db_.scalar("SELECT count(*) FROM outbox_host WHERE host_id = 'shared-id' AND stopped_at IS NULL") == "1";
    }, 10s));
    // Crashed: its row looks live for 3 beats (6 s), so the next process watches it for
    // 1.5 beats + 1 s (4 s) before it starts, which is when its connection is cut.
    first->signal(SIGKILL);
    first->wait(10s);
    const std::string hosts_backends =
        "FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'outboxd shared-id'";
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) " + hosts_backends) == "0"; }, 10s));

    const std::string second_log = log_path("second");
    ChildProcess second({OUTBOXD_BINARY, "run"}, env("6s"), second_log);
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) " + hosts_backends) != "0"; }, 10s))
        << read_file(second_log);
    EXPECT_EQ(read_file(second_log).find("started as"), std::string::npos) << "cut before it started";
    EXPECT_NE(db_.scalar("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) " + hosts_backends), "0") << read_file(second_log);
    ASSERT_TRUE(wait_until([&] { return read_file(second_log).find("started as shared-id") != std::string::npos; }, 30s))
        << read_file(second_log);
    EXPECT_NE(read_file(second_log).find("lost the database connection during start-up"), std::string::npos)
        << read_file(second_log);
    // It works: an event published now completes.
    publish_many(db_.url(), "TestRequested", R"({"db": true})", 1);
    EXPECT_TRUE(wait_until([&] {
        return db_.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "1";
    }, 15s));
    second.signal(SIGTERM);
    EXPECT_EQ(second.wait(20s), std::optional<int>(0)) << read_file(second_log);
}

// The start-up's connections share one database.startup_timeout: a connection lost during
// the checks, to a database that then refuses every connection, ends the start within that
// timeout, not a fresh one after the loss.
TEST_F(HostIdentityE2E, AStartUpThatLosesTheDatabaseForGoodExitsOneWithinOneStartupTimeout) {
    const std::string first_log = log_path("first");
    // A 12 s lease beats every 4 s: the next process watches the crashed row for 7 s.
    const auto first = started_host(first_log, "12s");
    ASSERT_FALSE(::testing::Test::HasFailure());
    first->signal(SIGKILL);
    first->wait(10s);
    const std::string hosts_backends =
        "FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'outboxd shared-id'";
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) " + hosts_backends) == "0"; }, 10s));

    auto second_env = env("12s");
    second_env["OUTBOX_DATABASE_STARTUP_TIMEOUT"] = "6s";
    const std::string second_log = log_path("second");
    const auto started = std::chrono::steady_clock::now();
    ChildProcess second({OUTBOXD_BINARY, "run"}, second_env, second_log);
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT count(*) " + hosts_backends) != "0"; }, 10s))
        << read_file(second_log);
    // 5 s into its 6 s, while it still watches, the database stops taking connections.
    std::this_thread::sleep_until(started + 5s);
    ASSERT_EQ(read_file(second_log).find("started as"), std::string::npos) << read_file(second_log);
    {
        pqxx::connection admin(server_url());
        pqxx::nontransaction tx(admin);
        tx.exec("ALTER DATABASE " + tx.quote_name(db_.name()) + " WITH ALLOW_CONNECTIONS false");
        tx.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = " + tx.quote(db_.name()) +
                " AND application_name = 'outboxd shared-id'");
    }
    const auto code = second.wait(20s);
    const auto took = std::chrono::steady_clock::now() - started;
    {
        pqxx::connection admin(server_url());
        pqxx::nontransaction(admin).exec("ALTER DATABASE " + admin.quote_name(db_.name()) + " WITH ALLOW_CONNECTIONS true");
    }
    EXPECT_EQ(code, std::optional<int>(1)) << read_file(second_log);
    EXPECT_NE(read_file(second_log).find("within database.startup_timeout"), std::string::npos) << read_file(second_log);
    // 6 s from its start, and 3 s for a loaded machine; a fresh timeout after the loss ends at 11 s.
    EXPECT_LT(took, 9s) << read_file(second_log);
}

TEST_F(HostIdentityE2E, AProcessRestartedUnderItsIdAfterACrashStartsAndLeavesTheOldLeasesToTheRescuer) {
    const std::string first_log = log_path("first");
    ChildProcess first({OUTBOXD_BINARY, "run"}, env("20s"), first_log);
    const auto ids = publish_many(db_.url(), "TestRequested", R"({"db": true, "sleep_ms": 60000})", 1);
    ASSERT_TRUE(wait_until([&] { return db_.scalar("SELECT status FROM event_publication WHERE event_id = '" + ids[0] + "'") ==
                                        "PROCESSING"; }, 20s))
        << read_file(first_log);
    const std::string old_incarnation =
        db_.scalar("SELECT lease_incarnation FROM event_publication WHERE event_id = '" + ids[0] + "'");
    EXPECT_EQ(old_incarnation.size(), 16u) << "the claim records its process's incarnation";
    first.signal(SIGKILL);
    first.wait(10s);

    // Restarted at once, while the crashed process's row still looks live (heartbeat every 5 s).
    const std::string second_log = log_path("second");
    const auto restarted_at = std::chrono::steady_clock::now();
    ChildProcess second({OUTBOXD_BINARY, "run"}, env("20s"), second_log);
    ASSERT_TRUE(wait_until([&] { return read_file(second_log).find("started as shared-id") != std::string::npos; }, 20s))
        << read_file(second_log);
    // It watches the row for 1.5 beats + 1 s (11 s); waiting until the row looked dead (3 beats) would take 20 s.
    EXPECT_LT(std::chrono::steady_clock::now() - restarted_at, 17s);
    EXPECT_TRUE(wait_until([&] {
        const std::string now = db_.scalar("SELECT coalesce(incarnation, '') FROM outbox_host WHERE host_id = 'shared-id'");
        return now.size() == 16 && now != old_incarnation;
    }, 10s)) << "the new process writes the row with an incarnation of its own";
    // The crashed process's lease is not the new one's: it stays until it expires and the
    // rescuer takes it (WORKER_LOST), which UntrackedLeases.* and the fault tier cover.
    EXPECT_EQ(db_.scalar("SELECT status || ' ' || lease_incarnation FROM event_publication WHERE event_id = '" + ids[0] + "'"),
              "PROCESSING " + old_incarnation);
    second.signal(SIGTERM);
    second.wait(20s);
}

}  // namespace
}  // namespace outbox::test
