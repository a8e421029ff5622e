// kill -9 of one host of a fleet of three, over and over, while 20,000 events with random
// retryable failures go through: nothing is lost, nothing is stuck, no effect commits twice.
#include <gtest/gtest.h>

#include <array>
#include <iostream>
#include <random>
#include <thread>

#include <signal.h>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

TEST(KillNine, OneOfThreeHostsKilledTwentyTimesLosesNothingAndCommitsNoEffectTwice) {
    constexpr int kEvents = 20'000;
    constexpr int kKills = 20;
    constexpr int kMaxAttempts = 10;
    TestDatabase db;
    create_scripted_effect_table(db.url());
    // Scattered over the events: 60% succeed at once, 25% fail once, 15% fail twice; every
    // event writes a DB effect. 30-90 ms of work each keeps 3 x 8 workers under ~400 events/s,
    // so the run outlasts the kill schedule and kills land inside handlers.
    publish_generated(db.url(), kEvents,
                      "jsonb_build_object('db', true, 'sleep_ms', 30 + abs(hashtext('s' || g)) % 61, 'fail_times', "
                      "CASE WHEN abs(hashtext(g::text)) % 100 < 60 THEN 0 "
                      "WHEN abs(hashtext(g::text)) % 100 < 85 THEN 1 ELSE 2 END)");

    const Fleet fleet(db.url(), {{"OUTBOX_LEASE_DURATION", "2s"},
                                 {"OUTBOX_CONCURRENCY", "8"},
                                 {"OUTBOX_BATCH_SIZE", "50"},
                                 {"OUTBOX_POLL_INTERVAL", "200ms"},
                                 {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                                 {"OUTBOX_MAX_BACKOFF", "500ms"},
                                 {"OUTBOX_MAX_ATTEMPTS", std::to_string(kMaxAttempts)}});
    auto hosts = start_hosts(fleet, 3);
    const auto name = host_name;
    std::mt19937 random = kill_schedule();
    std::uniform_int_distribution<int> pause_ms(200, 2000);
    std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
    long long max_stuck = 0;

    for (int kill = 0; kill < kKills; ++kill) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
        const std::size_t victim = pick(random);
        ASSERT_GT(unsettled(db.url()), 0) << "kill " << kill << " must land mid-run for the test to mean anything";
        ASSERT_NO_FATAL_FAILURE(kill_holding_host_and_restart(fleet, hosts, victim, db.url(), 20s, max_stuck));
    }

    const bool settled = wait_until(
        [&] {
            max_stuck = std::max(max_stuck, stuck_processing(db.url(), 5s));
            return unsettled(db.url()) == 0;
        },
        150s);
    ASSERT_TRUE(settled) << status_summary(db.url());
    for (std::size_t i = 0; i < hosts.size(); ++i) stop_cleanly(fleet, *hosts[i], name(i));

    EXPECT_EQ(max_stuck, 0) << "a dead host's PROCESSING rows are recovered within a few seconds of their lease";
    const long long completed = count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
    expect_final_invariants(db.url(), {"WORKER_LOST", "SCRIPTED_FLAKY"}, completed);
    EXPECT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED' "
                              "AND attempt_count <> " + std::to_string(kMaxAttempts)),
              0)
        << "only an event whose attempts ran out goes to review: every fault here is retryable";
    EXPECT_EQ(count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED' "
                              "AND attempt_count < (payload->>'fail_times')::int + 1"),
              0)
        << "the scripted failures really happened";
    EXPECT_GE(count(db.url(), "SELECT count(*) FROM event_publication WHERE attempt_count > "
                              "(payload->>'fail_times')::int + 1"),
              kKills)
        << "kills cost attempts: each one lands on events in flight";
}

// The same with commit groups (handlers.scripted.commit_group): kills land while groups of
// up to 16 events are open in a transaction. A killed group commits nothing (its events are
// rescued and run again) and no group's work is committed twice.
TEST(KillNine, HostsKilledInsideCommitGroupsLoseNothingAndCommitNoEffectTwice) {
    constexpr int kEvents = 4'000;
    constexpr int kKills = 8;
    TestDatabase db;
    create_scripted_effect_table(db.url());
    // 5-20 ms of work each, 10% fail once inside their group: a group of 16 stays open about
    // 200 ms, so most kills find one open.
    publish_generated(db.url(), kEvents,
                      "jsonb_build_object('db', true, 'sleep_ms', 5 + abs(hashtext('s' || g)) % 16, 'fail_times', "
                      "CASE WHEN abs(hashtext(g::text)) % 100 < 10 THEN 1 ELSE 0 END)");
    const Fleet fleet(db.url(),
                      {{"OUTBOX_LEASE_DURATION", "2s"},
                       {"OUTBOX_CONCURRENCY", "4"},
                       {"OUTBOX_BATCH_SIZE", "64"},
                       {"OUTBOX_POLL_INTERVAL", "200ms"},
                       {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                       {"OUTBOX_MAX_BACKOFF", "500ms"},
                       {"OUTBOX_MAX_ATTEMPTS", "10"}},
                      {OUTBOX_FIXTURE_SCRIPTED}, "  scripted:\n    commit_group: {max_events: 16, max_wait: 1s}\n");
    auto hosts = start_hosts(fleet, 2);
    std::mt19937 random = kill_schedule();
    std::uniform_int_distribution<int> pause_ms(300, 1500);
    std::uniform_int_distribution<std::size_t> pick(0, hosts.size() - 1);
    long long max_stuck = 0;
    for (int kill = 0; kill < kKills; ++kill) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms(random)));
        ASSERT_GT(unsettled(db.url()), 0) << "kill " << kill << " must land mid-run for the test to mean anything";
        ASSERT_NO_FATAL_FAILURE(kill_holding_host_and_restart(fleet, hosts, pick(random), db.url(), 20s, max_stuck));
    }
    const bool settled = wait_until(
        [&] {
            max_stuck = std::max(max_stuck, stuck_processing(db.url(), 5s));
            return unsettled(db.url()) == 0;
        },
        150s);
    ASSERT_TRUE(settled) << status_summary(db.url());
    for (std::size_t i = 0; i < hosts.size(); ++i) stop_cleanly(fleet, *hosts[i], host_name(i));
    EXPECT_EQ(max_stuck, 0);
    const long long completed = count(db.url(), "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'");
    expect_final_invariants(db.url(), {"WORKER_LOST", "SCRIPTED_FLAKY"}, completed);
    // The fence sets completed_at to now(), the same for every event of one transaction.
    EXPECT_LT(count(db.url(), "SELECT count(DISTINCT completed_at) FROM event_publication"), kEvents / 2)
        << "the events ran in groups";
}

}  // namespace
}  // namespace outbox::test::fault
