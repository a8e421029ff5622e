// Plugin directory operations on the real binary: a plugin deployed while the host runs is
// served within seconds, and the fleet view shows which host runs what.
#include <gtest/gtest.h>

#include <filesystem>

#include <signal.h>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/plugin_dir.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::map<std::string, std::string> host_env(const std::string& url, const fs::path& plugins, const std::string& id) {
    return {{"OUTBOX_DATABASE_URL", url},   {"OUTBOX_PLUGIN_DIR", plugins.string()}, {"OUTBOX_LEASE_DURATION", "3s"},
            {"OUTBOX_POLL_INTERVAL", "200ms"}, {"OUTBOX_ADMIN_LISTEN", "off"},        {"OUTBOX_HOST_ID", id}};
}

TEST(HotPluginsE2E, APluginRenamedIntoThePluginDirectoryIsServedWithoutRestart) {
    TestDatabase db;
    TempDir dir;
    create_scripted_effect_table(db.url());
    const fs::path plugins = make_plugin_dir(dir.path());
    ChildProcess host({OUTBOXD_BINARY, "run"}, host_env(db.url(), plugins, "hot-1"), (dir.path() / "host.log").string());
    publish_many(db.url(), "VersionedRequested", R"({"db": true})", 5);
    // The host is up (and would have claimed by now had it a handler): it logged its start
    // and registered in the fleet view.
    ASSERT_TRUE(wait_until([&] {
        return read_file((dir.path() / "host.log").string()).find("started as hot-1") != std::string::npos &&
               db.scalar("SELECT count(*) FROM outbox_host WHERE host_id = 'hot-1'") == "1";
    }, 20s)) << read_file((dir.path() / "host.log").string());
    std::this_thread::sleep_for(500ms);  // more than two poll intervals
    ASSERT_EQ(db.scalar("SELECT count(*) FROM event_publication WHERE status = 'PENDING'"), "5");

    const auto deployed_at = std::chrono::steady_clock::now();
    deploy_plugin(OUTBOX_FIXTURE_VERSIONED_V1, plugins / "libversioned.so");
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") == "5"; },
                           10s))
        << read_file((dir.path() / "host.log").string());
    EXPECT_LT(std::chrono::steady_clock::now() - deployed_at, 10s);

    deploy_plugin(OUTBOX_FIXTURE_ABI_MAJOR_MISMATCH, plugins / "libversioned.so");
    ASSERT_TRUE(wait_until([&] { return read_file((dir.path() / "host.log").string()).find("plugin rejected") != std::string::npos; },
                           10s));
    publish_many(db.url(), "VersionedRequested", R"({"db": true})", 2);
    EXPECT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM scripted_effect") == "7"; }, 10s))
        << "the running version keeps serving after a bad replacement";

    host.signal(SIGTERM);
    EXPECT_EQ(host.wait(20s), std::optional<int>(0));
}

TEST(HotPluginsE2E, StatusShowsTheFleetFlagsDifferentHandlerSetsAndAKilledHostAsGone) {
    TestDatabase db;
    TempDir dir;
    const fs::path plugins_a = dir.path() / "a";
    const fs::path plugins_b = dir.path() / "b";
    fs::create_directory(plugins_a);
    fs::create_directory(plugins_b);
    fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins_a / "libscripted.so");
    fs::copy_file(OUTBOX_FIXTURE_SCRIPTED_B, plugins_a / "libscripted_b.so");
    fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins_b / "libscripted.so");
    ChildProcess a({OUTBOXD_BINARY, "run"}, host_env(db.url(), plugins_a, "host-a"), (dir.path() / "a.log").string());
    auto b = std::make_unique<ChildProcess>(std::vector<std::string>{OUTBOXD_BINARY, "run"},
                                            host_env(db.url(), plugins_b, "host-b"), (dir.path() / "b.log").string());
    ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM outbox_host") == "2"; }, 10s));

    const std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db.url()}};
    auto [code, output] = run_command({OUTBOXD_BINARY, "status"}, env);
    EXPECT_EQ(code, 0) << output;
    EXPECT_NE(output.find("host-a"), std::string::npos) << output;
    EXPECT_NE(output.find("scripted-b (libscripted_b.so"), std::string::npos) << output;
    EXPECT_NE(output.find("TestRequested:"), std::string::npos) << "the differing event type is flagged:\n" << output;
    EXPECT_NE(output.find("handlers {scripted,scripted-b} on host-a"), std::string::npos) << output;
    EXPECT_NE(output.find("handlers {scripted} on host-b"), std::string::npos) << output;
    EXPECT_NE(output.find("PLUGIN BUILDS THAT DIFFER BETWEEN LIVE HOSTS\nnone"), std::string::npos)
        << "both hosts load the same scripted file:\n" << output;

    b->signal(SIGKILL);
    b->wait(10s);
    // Gone after three missed heartbeats (a third of the 3s lease each).
    ASSERT_TRUE(wait_until([&] {
        return std::get<1>(run_command({OUTBOXD_BINARY, "status"}, env)).find("host-b") != std::string::npos &&
               std::get<1>(run_command({OUTBOXD_BINARY, "status"}, env)).find("gone") != std::string::npos;
    }, 15s));
    std::tie(code, output) = run_command({OUTBOXD_BINARY, "status"}, env);
    EXPECT_NE(output.find("HANDLER MISMATCHES BETWEEN LIVE HOSTS\nnone"), std::string::npos)
        << "a gone host no longer counts:\n" << output;
    a.signal(SIGTERM);
    EXPECT_EQ(a.wait(20s), std::optional<int>(0));
    std::tie(code, output) = run_command({OUTBOXD_BINARY, "status"}, env);
    EXPECT_NE(output.find("stopped"), std::string::npos) << output;
}

}  // namespace
}  // namespace outbox::test
