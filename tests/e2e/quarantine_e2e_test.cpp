// Poison-event quarantine: a plugin that kills the process on one event must not take the
// events that merely shared its batch down with it.
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

TEST(Quarantine, OnlyThePoisonEventUsesUpItsAttemptsWhenItCrashesTheHost) {
    TestDatabase db;
    TempDir dir;
    const fs::path plugins = scripted_plugin_dir(dir.path());
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

TEST(Quarantine, SuspectRetriesLeaveInnocentThroughputOnTheSurvivingHostAtLeastHalf) {
    TestDatabase db;
    TempDir dir;
    const fs::path plugins = scripted_plugin_dir(dir.path());
    create_scripted_effect_table(db.url());
    std::map<std::string, std::string> env{{"OUTBOX_DATABASE_URL", db.url()},
                                           {"OUTBOX_PLUGIN_DIR", plugins.string()},
                                           {"OUTBOX_LEASE_DURATION", "4s"},
                                           {"OUTBOX_POLL_INTERVAL", "100ms"},
                                           {"OUTBOX_MAX_ATTEMPTS", "5"},
                                           {"OUTBOX_INITIAL_BACKOFF", "0s"},
                                           {"OUTBOX_MAX_BACKOFF", "0s"},
                                           {"OUTBOX_CONCURRENCY", "20"},
                                           {"OUTBOX_BATCH_SIZE", "20"},
                                           {"OUTBOX_ADMIN_LISTEN", "off"}};

    // A host dies with 20 events in flight: once their leases expire they are suspects.
    constexpr int kSuspects = 20;
    publish_many(db.url(), "TestBatch", R"({"db": true, "sleep_ms": 500})", kSuspects);
    {
        ChildProcess victim({OUTBOXD_BINARY, "run"}, env, (dir.path() / "victim.log").string());
        ASSERT_TRUE(wait_until([&] { return db.scalar("SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'") ==
                                            std::to_string(kSuspects); },
                               20s))
            << read_file((dir.path() / "victim.log").string());
        victim.signal(SIGKILL);
        ASSERT_EQ(victim.wait(10s), std::optional<int>(128 + SIGKILL));
    }
    // Innocent work for the survivor: far more than it gets through while suspects retry.
    publish_many(db.url(), "TestRequested", R"({"db": true, "sleep_ms": 200})", 400);
    env["OUTBOX_CONCURRENCY"] = "4";
    ChildProcess survivor({OUTBOXD_BINARY, "run"}, env, (dir.path() / "survivor.log").string());
    const bool retried = wait_until(
        [&] { return db.scalar("SELECT count(*) FROM event_publication WHERE event_type = 'TestBatch' AND status = 'COMPLETED'") ==
                     std::to_string(kSuspects); },
        60s);
    survivor.signal(SIGTERM);
    EXPECT_EQ(survivor.wait(20s), std::optional<int>(0));
    ASSERT_TRUE(retried) << read_file((dir.path() / "survivor.log").string());
    EXPECT_EQ(db.scalar("SELECT count(*) FROM scripted_effect s JOIN event_publication e USING (event_id) "
                        "WHERE e.event_type = 'TestBatch' AND s.attempt = 2"),
              std::to_string(kSuspects))
        << "every event of the dead host was retried as a suspect";

    // Effects are recorded as each call ends. The suspects' retries (one after the other)
    // span [first end - 0.5 s, last end]; the baseline is the survivor's innocent
    // completions before that, less its first half second.
    const auto seconds = [&](const std::string& sql) { return std::stod(db.scalar(sql)); };
    const double retry_start = seconds("SELECT extract(epoch FROM min(s.at)) - 0.5 FROM scripted_effect s "
                                       "JOIN event_publication e USING (event_id) WHERE e.event_type = 'TestBatch'");
    const double retry_end = seconds("SELECT extract(epoch FROM max(s.at)) FROM scripted_effect s "
                                     "JOIN event_publication e USING (event_id) WHERE e.event_type = 'TestBatch'");
    const double baseline_start = seconds("SELECT extract(epoch FROM min(s.at)) + 0.5 FROM scripted_effect s "
                                          "JOIN event_publication e USING (event_id) WHERE e.event_type = 'TestRequested'");
    const auto innocent_between = [&](double from, double to) {
        return seconds("SELECT count(*) FROM scripted_effect s JOIN event_publication e USING (event_id) "
                       "WHERE e.event_type = 'TestRequested' AND extract(epoch FROM s.at) >= " + std::to_string(from) +
                       " AND extract(epoch FROM s.at) < " + std::to_string(to));
    };
    ASSERT_GT(retry_start - baseline_start, 1.0) << "the baseline window is long enough to measure";
    ASSERT_GT(retry_end - retry_start, 1.0);
    const double baseline = innocent_between(baseline_start, retry_start) / (retry_start - baseline_start);
    const double during = innocent_between(retry_start, retry_end) / (retry_end - retry_start);
    // Suspects retried one at a time take one of the 4 slots: about 3/4 of the baseline.
    // Half leaves room for load that changes between the windows; suspects that held the
    // innocent work back would take it far lower.
    EXPECT_GE(during, 0.5 * baseline) << "innocent completions per second: " << baseline << " before the suspects, "
                                      << during << " while they were retried";
    EXPECT_EQ(db.scalar("SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'"), "0");
}

}  // namespace
}  // namespace outbox::test
