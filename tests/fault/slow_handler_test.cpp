// A handler slower than the lease: the heartbeat keeps extending it, so no other host takes
// the event over while it runs, and it runs once.
#include <gtest/gtest.h>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

TEST(SlowHandler, HeartbeatKeepsALeaseThreeTimesShorterThanTheHandlerAndNoSecondHostRunsIt) {
    constexpr int kEvents = 8;
    TestDatabase db;
    const std::string& url = db.url();
    create_scripted_effect_table(url);
    // db: an overlapping second run would fail the fixture's advisory lock (CONCURRENT_RUN).
    publish_many(url, "TestRequested", R"({"db": true, "sleep_ms": 7000})", kEvents);
    // A beat every 2/3 s: one may come over a second late on a loaded machine before the
    // lease lapses; a heartbeat that does not run loses it 2 s into a 7 s call.
    const Fleet fleet(url, {{"OUTBOX_LEASE_DURATION", "2s"},
                            {"OUTBOX_CONCURRENCY", "4"},
                            {"OUTBOX_BATCH_SIZE", "4"},
                            {"OUTBOX_POLL_INTERVAL", "100ms"}});
    auto first = fleet.start("first");
    ASSERT_TRUE(wait_until([&] { return count(url, "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' "
                                                   "AND lease_owner = 'first'") > 0; },
                           20s))
        << fleet.log("first");
    // The second host polls every 100ms and would take over any lease that lapsed.
    auto second = fleet.start("second");
    ASSERT_TRUE(wait_until([&] { return unsettled(url) == 0; }, 60s)) << status_summary(url);
    stop_cleanly(fleet, *first, "first");
    stop_cleanly(fleet, *second, "second");

    expect_final_invariants(url, {}, kEvents);
    EXPECT_EQ(count(url, "SELECT count(*) FROM event_publication WHERE attempt_count <> 1"), 0)
        << "no event was taken over: " << status_summary(url);
    for (const char* name : {"first", "second"}) {
        const std::string log = fleet.log(name);
        ASSERT_EQ(count_lines(log, "started as"), 1) << "the log is read from the right file\n" << log;
        ASSERT_EQ(count_lines(log, "outboxd stopped"), 1) << log;
        EXPECT_EQ(count_lines(log, "lease"), 0) << "no lease lost or rescued\n" << log;
    }
}

}  // namespace
}  // namespace outbox::test::fault
