// Nothing can hang a host: a database that is not there yet at start-up, a network path
// to PostgreSQL that goes silent (a stopped proxy: its kernel still acknowledges, nothing
// answers), handler calls that never return, and signals at every phase of start-up.
// Real outboxd processes, a PostgreSQL cluster of the test's own, socat as the proxy.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

TEST(Liveness, HostsStartedBeforeTheirDatabaseWaitForItAndThenServe) {
    OwnCluster cluster(false);
    const Fleet fleet(cluster.url(), {{"OUTBOX_POLL_INTERVAL", "200ms"}});
    std::vector<std::unique_ptr<ChildProcess>> hosts;
    const std::vector<std::string> names{"early-a", "early-b"};
    for (const auto& name : names) {
        hosts.push_back(std::make_unique<ChildProcess>(
            std::vector<std::string>{OUTBOXD_BINARY, "run", "--migrate"},
            std::map<std::string, std::string>{{"OUTBOX_DATABASE_URL", cluster.url()},
                                               {"OUTBOX_PLUGIN_DIR", fleet.plugin_dir().string()},
                                               {"OUTBOX_ADMIN_LISTEN", "off"},
                                               {"OUTBOX_HOST_ID", name},
                                               {"OUTBOX_POLL_INTERVAL", "200ms"}},
            (fleet.dir() / (name + ".log")).string()));
    }
    for (const auto& name : names) {
        ASSERT_TRUE(wait_until([&] { return count_lines(fleet.log(name), "waiting for the database") == 1; }, 10s))
            << fleet.log(name);
    }
    std::this_thread::sleep_for(10s);  // the scenario: PostgreSQL comes up 10 s after the hosts
    for (std::size_t i = 0; i < hosts.size(); ++i) ASSERT_FALSE(hosts[i]->wait(0ms)) << fleet.log(names[i]);
    cluster.start();
    publish_generated(cluster.url(), 200, "jsonb_build_object('db', true)");
    ASSERT_TRUE(wait_until([&] { return unsettled(cluster.url()) == 0; }, 60s)) << status_summary(cluster.url());
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        const std::string log = fleet.log(names[i]);
        EXPECT_EQ(count_lines(log, "waiting for the database"), 1) << "one line while waiting\n" << log;
        EXPECT_EQ(count_lines(log, "the database is reachable; starting"), 1) << log;
        stop_cleanly(fleet, *hosts[i], names[i]);
    }
    expect_final_invariants(cluster.url(), {}, 200);
}

TEST(Liveness, AHostWhoseDatabaseNeverComesExitsOneWhenTheStartUpTimeoutEnds) {
    const OwnCluster never_started(false);
    for (const std::string command : {"run", "migrate"}) {
        SCOPED_TRACE(command);
        const auto started = std::chrono::steady_clock::now();
        const auto [code, out] = run_command(
            {OUTBOXD_BINARY, command},
            {{"OUTBOX_DATABASE_URL", never_started.url()}, {"OUTBOX_DATABASE_STARTUP_TIMEOUT", "2s"},
             {"OUTBOX_ADMIN_LISTEN", "off"}, {"OUTBOX_PLUGIN_DIR", "/nonexistent"}},
            30s);
        EXPECT_EQ(code, 1) << out;
        // 2 s configured; 15 s allows a loaded machine and is far below the 60 s default.
        EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
        EXPECT_EQ(count_lines(out, "cannot reach the database"), 1) << out;
        if (command == "run") {
            EXPECT_EQ(count_lines(out, "waiting for the database"), 1) << out;
        }
    }
    // 0: fail at once, without waiting.
    const auto [code, out] = run_command({OUTBOXD_BINARY, "run"},
                                         {{"OUTBOX_DATABASE_URL", never_started.url()},
                                          {"OUTBOX_DATABASE_STARTUP_TIMEOUT", "0"}, {"OUTBOX_ADMIN_LISTEN", "off"}},
                                         30s);
    EXPECT_EQ(code, 1) << out;
    EXPECT_EQ(count_lines(out, "waiting for the database"), 0) << out;
}

TEST(Liveness, SigtermDuringEachPhaseOfStartUpStopsTheHostWithoutClaiming) {
    TestDatabase db;
    publish_many(db.url(), "TestRequested", "{}", 5);
    const OwnCluster never_started(false);
    {
        SCOPED_TRACE("waiting for the database");
        const Fleet fleet(never_started.url(), {});
        auto host = fleet.start("waiting");
        ASSERT_TRUE(wait_until([&] { return count_lines(fleet.log("waiting"), "waiting for the database") == 1; }, 10s));
        host->signal(SIGTERM);
        EXPECT_EQ(host->wait(5s), std::optional<int>(0)) << fleet.log("waiting");
    }
    {
        SCOPED_TRACE("loading plugins (a constructor that takes 3 s)");
        const Fleet fleet(db.url(), {}, {OUTBOX_FIXTURE_SLOW_CTOR});
        auto host = fleet.start("loading");
        // Inside the 3 s constructor: the library is mapped and not yet reported loaded.
        const std::string library = std::filesystem::path(OUTBOX_FIXTURE_SLOW_CTOR).filename().string();
        ASSERT_TRUE(wait_until([&] {
            return read_file("/proc/" + std::to_string(host->pid()) + "/maps").find(library) != std::string::npos &&
                   count_lines(fleet.log("loading"), "plugin loaded") == 0;
        }, 10s)) << fleet.log("loading");
        host->signal(SIGTERM);
        EXPECT_EQ(host->wait(10s), std::optional<int>(0)) << fleet.log("loading");
        EXPECT_EQ(count_lines(fleet.log("loading"), "stopped during start-up"), 1) << fleet.log("loading");
    }
    {
        SCOPED_TRACE("right after start");
        const Fleet fleet(db.url(), {}, {OUTBOX_FIXTURE_SLOW_CTOR});
        auto host = fleet.start("started");
        ASSERT_TRUE(wait_until([&] { return count_lines(fleet.log("started"), "started as") == 1; }, 20s));
        host->signal(SIGTERM);
        EXPECT_EQ(host->wait(15s), std::optional<int>(0)) << fleet.log("started");
    }
    EXPECT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'PENDING'"),
              count(db.url(), "SELECT count(*) FROM event_publication WHERE status <> 'COMPLETED'"))
        << "nothing left half-claimed";
}

// Review F2/F4: a call that never returns keeps its event. The stop exits 3 without storing
// an outcome, so the event stays leased until the lease expires after the process is gone;
// only then may the rescuer run it again (0.2.0 stored HANDLER_TIMEOUT while the call ran).
TEST(Liveness, AHandlerThatNeverReturnsMakesTheStopExitThreeAndLeavesItsEventToTheRescuer) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    const TempDir marks;
    const auto started = marks.path() / "started";
    const std::string stuck =
        publish_many(db.url(), "TestRequested",
                     nlohmann::json{{"block_forever", true}, {"started_file", started.string()}}.dump(), 1)[0];
    const Fleet fleet(db.url(), {{"OUTBOX_SHUTDOWN_TIMEOUT", "1s"}, {"OUTBOX_POLL_INTERVAL", "100ms"}});
    auto host = fleet.start("stuck");
    // The call itself must be running: a claimed event whose call has not started yet is
    // released by the stop, which then exits 0 (a loaded machine widens that gap).
    ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(started); }, 20s)) << fleet.log("stuck");
    ASSERT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'"), 1);
    host->signal(SIGTERM);
    EXPECT_EQ(host->wait(30s), std::optional<int>(3)) << fleet.log("stuck");
    EXPECT_EQ(db.scalar("SELECT status || ' ' || coalesce(last_error_code, '-') || ' ' || lease_owner FROM "
                        "event_publication WHERE event_id = '" + stuck + "'"),
              "PROCESSING - stuck")
        << "the stop must not store an outcome while the call may still be running";
    EXPECT_EQ(count_lines(fleet.log("stuck"), "never returned"), 1) << fleet.log("stuck");
}

TEST(Liveness, MoreStuckThreadsThanAllowedMakeTheHostExitThreeOnItsOwnAfterOtherWorkFinishes) {
    TestDatabase db;
    create_scripted_effect_table(db.url());
    publish_many(db.url(), "TestRequested", R"({"block_forever": true})", 2);
    const Fleet fleet(db.url(), {{"OUTBOX_HANDLER_TIMEOUT", "500ms"},
                                 {"OUTBOX_ABANDON_GRACE", "200ms"},
                                 {"OUTBOX_MAX_ABANDONED_THREADS", "1"},
                                 {"OUTBOX_MAX_ATTEMPTS", "1"},
                                 {"OUTBOX_CONCURRENCY", "4"},
                                 {"OUTBOX_SHUTDOWN_TIMEOUT", "2s"},
                                 {"OUTBOX_POLL_INTERVAL", "100ms"}});
    auto host = fleet.start("exhausted");
    EXPECT_EQ(host->wait(30s), std::optional<int>(3)) << fleet.log("exhausted");
    EXPECT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' AND "
                              "lease_owner = 'exhausted'"),
              2)
        << "the stuck calls' events stay leased to the exited host, for the rescuer once the leases expire";
    EXPECT_EQ(count_lines(fleet.log("exhausted"), "max_abandoned_threads"), 1) << fleet.log("exhausted");
}

TEST(Liveness, ATemporaryDirectoryThatCannotBeCreatedIsOneLineAndExitOne) {
    TestDatabase db;
    TempDir plugins;
    const auto [code, out] = run_command({OUTBOXD_BINARY, "run"},
                                         {{"OUTBOX_DATABASE_URL", db.url()}, {"OUTBOX_ADMIN_LISTEN", "off"},
                                          {"OUTBOX_PLUGIN_DIR", plugins.path().string()},
                                          {"TMPDIR", "/nonexistent/outboxd-tmp"}},
                                         30s);
    EXPECT_EQ(code, 1) << out;
    EXPECT_EQ(count_lines(out, "outboxd: fatal:"), 1) << out;
    EXPECT_EQ(out.find("terminate"), std::string::npos) << out;
}

TEST(Liveness, APathToTheDatabaseThatGoesSilentIsNoticedAndSurvived) {
    constexpr int kEvents = 3000;
    const OwnCluster cluster;
    const auto& url = cluster.url();
    publish_generated(url, kEvents, "jsonb_build_object('db', true, 'sleep_ms', 10)");
    const Fleet fleet(url, {});  // only for its plugin directory and log files
    const SilentableProxy proxy(cluster.port(), fleet.dir() / "socat.log");
    const std::string proxied = via_port(url, proxy.port());
    const std::vector<std::string> names{"quiet-a", "quiet-b"};
    std::vector<int> admin_ports;
    std::vector<std::unique_ptr<ChildProcess>> hosts;
    for (const auto& name : names) {
        // A port chosen for the other host may not be bound yet: never pick it twice.
        int port = free_port();
        while (port == proxy.port() || std::find(admin_ports.begin(), admin_ports.end(), port) != admin_ports.end()) {
            port = free_port();
        }
        admin_ports.push_back(port);
        hosts.push_back(fleet.start(name, {{"OUTBOX_DATABASE_URL", proxied},
                                           {"OUTBOX_ADMIN_LISTEN", "127.0.0.1:" + std::to_string(admin_ports.back())},
                                           {"OUTBOX_LEASE_DURATION", "6s"},
                                           {"OUTBOX_POLL_INTERVAL", "200ms"},
                                           {"OUTBOX_MAX_ATTEMPTS", "50"},
                                           {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                                           {"OUTBOX_MAX_BACKOFF", "1s"},
                                           {"OUTBOX_SHUTDOWN_TIMEOUT", name == "quiet-b" ? "5s" : "30s"}}));
    }
    const auto completed = [&] { return count(url, "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"); };
    ASSERT_TRUE(wait_until([&] { return completed() >= kEvents / 5; }, 60s)) << status_summary(url);

    proxy.freeze();
    const auto silence = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < names.size(); ++i) {
        ASSERT_TRUE(wait_until([&] { return count_lines(fleet.log(names[i]), "database unavailable") == 1; }, 30s))
            << names[i] << " did not notice within 30 s\n" << fleet.log(names[i]);
        httplib::Client admin("127.0.0.1", admin_ports[i]);
        admin.set_connection_timeout(5, 0);
        // The silence lasts 60 s: 5 s tells an answer held up by load from one held by it.
        admin.set_read_timeout(5, 0);
        const auto health = admin.Get("/healthz");
        ASSERT_TRUE(health) << "/healthz must answer within 5 s during the silence";
        EXPECT_EQ(health->status, 200);
        const auto ready = admin.Get("/readyz");
        ASSERT_TRUE(ready) << "/readyz must answer during the silence";
        EXPECT_EQ(ready->status, 503) << ready->body;
    }
    // A stop during the silence honours shutdown_timeout (5 s for quiet-b): writes that cannot
    // reach the database are left to lease expiry, never waited for beyond the bound
    // (correctness review item 9; 0.2.0 took more than 15 s here).
    const auto term = std::chrono::steady_clock::now();
    hosts[1]->signal(SIGTERM);
    const auto code = hosts[1]->wait(60s);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - term);
    EXPECT_TRUE(code == std::optional<int>(0) || code == std::optional<int>(3)) << (code ? *code : -1) << "\n"
                                                                                << fleet.log(names[1]);
    EXPECT_LT(took, 7s) << took.count() << " ms\n" << fleet.log(names[1]);

    std::this_thread::sleep_until(silence + 60s);
    ASSERT_FALSE(hosts[0]->wait(0ms)) << fleet.log(names[0]);
    EXPECT_EQ(count_lines(fleet.log(names[0]), "database unavailable"), 1) << "one line for a 60 s silence\n"
                                                                           << fleet.log(names[0]);
    proxy.thaw();
    hosts[1] = fleet.start(names[1], {{"OUTBOX_DATABASE_URL", proxied}, {"OUTBOX_LEASE_DURATION", "6s"},
                                      {"OUTBOX_MAX_ATTEMPTS", "50"}, {"OUTBOX_POLL_INTERVAL", "200ms"}});
    ASSERT_TRUE(wait_until([&] { return unsettled(url) == 0; }, 120s)) << status_summary(url);
    EXPECT_GE(count_lines(fleet.log(names[0]), "database reachable again"), 1) << fleet.log(names[0]);
    for (std::size_t i = 0; i < names.size(); ++i) stop_cleanly(fleet, *hosts[i], names[i]);
    expect_final_invariants(url, {}, kEvents);
}

}  // namespace
}  // namespace outbox::test::fault
