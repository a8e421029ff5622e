// Poison-event quarantine: a plugin that kills the process on one event must not take the
// events that merely shared its batch down with it.
#include <gtest/gtest.h>

#include <filesystem>

#include <signal.h>

#include "support/child_process.hpp"
#include "support/pg_fixture.hpp"
#include "support/temp_dir.hpp"
#include "support/test_host.hpp"

namespace outbox::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

TEST(Quarantine, OnlyThePoisonEventUsesUpItsAttemptsWhenItCrashesTheHost) {
    TestDatabase db;
    TempDir dir;
    const fs::path plugins = dir.path() / "plugins";
    fs::create_directory(plugins);
    fs::copy_file(OUTBOX_FIXTURE_SCRIPTED, plugins / "libscripted.so");
    create_scripted_effect_table(db.url());

    // The poison event sits in the middle of a burst, so the first claim batches it with
    // innocent events that are still running when it aborts the process.
    publish_many(db.url(), "TestRequested", R"({"db": true, "sleep_ms": 300})", 10);
    const std::string poison = publish_many(db.url(), "TestRequested", R"({"mode": "crash", "sleep_ms": 100})", 1)[0];
    publish_many(db.url(), "TestRequested", R"({"db": true, "sleep_ms": 300})", 9);

    const std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db.url()},
                                                 {"OUTBOX_PLUGIN_DIR", plugins.string()},
                                                 {"OUTBOX_LEASE_DURATION", "2s"},
                                                 {"OUTBOX_POLL_INTERVAL", "100ms"},
                                                 {"OUTBOX_MAX_ATTEMPTS", "3"},
                                                 {"OUTBOX_INITIAL_BACKOFF", "0s"},
                                                 {"OUTBOX_MAX_BACKOFF", "0s"},
                                                 {"OUTBOX_CONCURRENCY", "8"},
                                                 {"OUTBOX_BATCH_SIZE", "20"},
                                                 {"OUTBOX_ADMIN_LISTEN", "off"}};
    const auto settled = [&] {
        return db.scalar("SELECT count(*) FROM event_publication WHERE status IN ('COMPLETED', 'REVIEW_REQUIRED')") ==
               "20";
    };
    // The supervisor: restart the host whenever it dies, as systemd would.
    int crashes = 0;
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (!settled() && std::chrono::steady_clock::now() < deadline && crashes < 10) {
        ChildProcess host({OUTBOXD_BINARY, "run"}, env, (dir.path() / "host.log").string());
        while (!settled() && !host.wait(100ms) && std::chrono::steady_clock::now() < deadline) {
        }
        if (const auto code = host.wait(0ms)) {
            EXPECT_EQ(*code, 128 + SIGABRT) << read_file((dir.path() / "host.log").string());
            ++crashes;
        } else {
            host.signal(SIGTERM);
            EXPECT_EQ(host.wait(20s), std::optional<int>(0));
        }
    }
    ASSERT_TRUE(settled()) << read_file((dir.path() / "host.log").string());
    EXPECT_EQ(crashes, 3) << "one crash per attempt of the poison event, and no more";
    EXPECT_EQ(db.scalar("SELECT status || ' ' || last_error_code || ' ' || attempt_count FROM event_publication "
                        "WHERE event_id = '" + poison + "'"),
              "REVIEW_REQUIRED WORKER_LOST 3");
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'"), "19")
        << "events that only shared the poison event's batch complete";
    EXPECT_EQ(db.scalar("SELECT coalesce(max(attempt_count), 0) FROM event_publication WHERE status = 'COMPLETED'"), "2")
        << "an innocent event loses at most the attempt of the first crash";
    EXPECT_EQ(db.scalar("SELECT count(*) FROM scripted_effect"), "19") << "no effect committed twice";
}

}  // namespace
}  // namespace outbox::test
