// A host frozen (SIGSTOP) past its lease while another takes its events over, then resumed
// (SIGCONT): fencing keeps the stale host from committing anything.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include <signal.h>

#include "fault/fault_fixture.hpp"
#include "support/pg_fixture.hpp"
#include "support/test_host.hpp"

namespace outbox::test::fault {
namespace {

using namespace std::chrono_literals;

TEST(FrozenHost, ResumedAfterItsLeaseWasTakenOverCommitsNothing) {
    constexpr int kEvents = 8;
    TestDatabase db;
    const std::string& url = db.url();
    create_scripted_effect_table(url);
    // ignore_cancel: the resumed host's handlers run to the end and try to commit, so the
    // fence (not the cancellation) is what stops them.
    publish_many(url, "TestRequested", R"({"db": true, "sleep_ms": 1000, "ignore_cancel": true})", kEvents);
    const Fleet fleet(url, {{"OUTBOX_LEASE_DURATION", "2s"},
                            {"OUTBOX_CONCURRENCY", "4"},  // 4 running + 4 queued: it claims all 8
                            {"OUTBOX_POLL_INTERVAL", "100ms"},
                            {"OUTBOX_INITIAL_BACKOFF", "100ms"},
                            {"OUTBOX_MAX_BACKOFF", "500ms"}});
    auto frozen = fleet.start("frozen");
    const auto held_by_frozen = [&] {
        return count(url, "SELECT count(*) FROM event_publication WHERE status = 'PROCESSING' AND lease_owner = 'frozen'");
    };
    ASSERT_TRUE(wait_until([&] { return held_by_frozen() == kEvents; }, 20s)) << fleet.log("frozen");

    // Freeze it between handler transactions: one left open would hold the fixture's
    // advisory lock, and the taker's run would report the overlap as CONCURRENT_RUN (an
    // overlap beyond the lease that the README says is not prevented; the fence still
    // rolls the stale transaction back).
    std::mt19937 random(std::random_device{}());
    bool frozen_between_transactions = false;
    for (int attempt = 0; attempt < 50 && !frozen_between_transactions; ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(10, 200)(random)));
        frozen->signal(SIGSTOP);
        frozen_between_transactions =
            count(url, "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
                       "WHERE l.locktype = 'advisory' AND d.datname = current_database()") == 0;
        if (!frozen_between_transactions) frozen->signal(SIGCONT);
    }
    ASSERT_TRUE(frozen_between_transactions);
    ASSERT_GT(held_by_frozen(), 0) << "the frozen host must hold leases for the test to mean anything";

    auto taker = fleet.start("taker");
    ASSERT_TRUE(wait_until([&] { return count(url, "SELECT count(*) FROM event_publication WHERE status = 'COMPLETED'") ==
                                        kEvents; },
                           60s))
        << status_summary(url) << "\n" << fleet.log("taker");

    // Whatever committed so far is legitimate: the frozen host's work before the freeze and
    // the taker's. Attempt numbers cannot tell them apart: under load the frozen host's own
    // rescuer may have run one of its events as a suspect before the freeze, and the taker's
    // rescue then refunds the others' attempts, so the taker runs them as attempt 1 again.
    const long long effects_before_resume = count(url, "SELECT count(*) FROM scripted_effect");
    frozen->signal(SIGCONT);
    // The resumed host's handlers finish their sleep, write their effect and reach the fence.
    EXPECT_TRUE(wait_until([&] { return count_lines(fleet.log("frozen"), "its result was discarded") > 0; }, 15s))
        << fleet.log("frozen");
    std::this_thread::sleep_for(2s);  // time for anything it might still (wrongly) commit
    stop_cleanly(fleet, *frozen, "frozen");
    stop_cleanly(fleet, *taker, "taker");

    expect_final_invariants(url, {}, kEvents);
    EXPECT_EQ(count(url, "SELECT count(*) FROM scripted_effect"), effects_before_resume)
        << "the resumed host's handlers ran to the end, and none of their effects may commit";
}

}  // namespace
}  // namespace outbox::test::fault
