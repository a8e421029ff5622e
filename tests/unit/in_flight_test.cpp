#include "dispatch/in_flight.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace outbox::dispatch {
namespace {

using namespace std::chrono_literals;
using TimePoint = std::chrono::steady_clock::time_point;

// Time is a parameter of try_abandon(): fixed points, no clock.
constexpr TimePoint kNow = TimePoint{} + 1h;
constexpr TimePoint kOverdue = kNow - 1s;
constexpr TimePoint kLater = kNow + 1min;

std::unique_ptr<InFlight> flight(const std::string& token = "t1") {
    return std::make_unique<InFlight>(lease::LeaseRef{"e1", token}, "A", 1, false);
}

TEST(InFlightCall, NothingEndsBeforeACallStarted) {
    auto f = flight();
    EXPECT_FALSE(f->call_returned());
    EXPECT_FALSE(f->try_abandon(kNow));
    EXPECT_FALSE(f->force_abandon());
}

TEST(InFlightCall, TryAbandonRefusesBeforeTheDeadline) {
    auto f = flight();
    f->call_started(kNow);
    EXPECT_FALSE(f->try_abandon(kNow - 1ns)) << "one tick before the deadline the call keeps running";
    EXPECT_TRUE(f->try_abandon(kNow)) << "at the deadline the call is overdue";
}

TEST(InFlightCall, AReturnAfterTheAbandonIsRefused) {
    auto f = flight();
    f->call_started(kOverdue);
    ASSERT_TRUE(f->try_abandon(kNow));
    EXPECT_FALSE(f->call_returned()) << "the late result of an abandoned call must not be written";
    EXPECT_FALSE(f->try_abandon(kNow)) << "a call is abandoned once";
}

TEST(InFlightCall, AReturnedCallCannotBeAbandoned) {
    auto f = flight();
    f->call_started(kOverdue);
    ASSERT_TRUE(f->call_returned());
    EXPECT_FALSE(f->try_abandon(kNow));
    EXPECT_FALSE(f->force_abandon());
    EXPECT_FALSE(f->call_returned()) << "a call returns once";
}

TEST(InFlightCall, ForceAbandonIgnoresTheDeadline) {
    auto f = flight();
    f->call_started(kLater);
    EXPECT_FALSE(f->try_abandon(kNow));
    EXPECT_TRUE(f->force_abandon());
    EXPECT_FALSE(f->call_returned());
}

TEST(InFlightCall, ANewCallRunsWithItsOwnDeadline) {
    auto f = flight();
    f->call_started(kOverdue);
    ASSERT_TRUE(f->try_abandon(kNow));
    f->call_started(kLater);  // the next handler of the same event
    EXPECT_FALSE(f->try_abandon(kNow)) << "the previous call's deadline does not carry over";
    EXPECT_TRUE(f->call_returned()) << "the previous call's abandonment does not carry over";
}

// Lines two threads up for each round by spinning, so that they leave it within
// nanoseconds of each other (a blocking barrier wakes them microseconds apart).
class SpinStart {
public:
    void arrive_and_wait(int round) {
        arrived_.fetch_add(1);
        for (int spins = 1; arrived_.load() < 2 * (round + 1); ++spins) {
            if (spins % 4096 == 0) std::this_thread::yield();  // the other thread may be off-CPU
        }
    }

private:
    std::atomic<int> arrived_{0};
};

// The interleaving the compare-and-swap exists for, laid out step by step: the host looked
// at the call while it ran, the worker's return came before the host's swap.
TEST(InFlightCall, AReturnBetweenTheHostsLookAndItsSwapWins) {
    auto f = flight();
    f->call_started(kOverdue);
    const auto seen = f->seen_call();
    ASSERT_TRUE(f->call_returned());
    EXPECT_FALSE(f->try_abandon(kNow, seen)) << "a returned call was abandoned: its result would be written and discarded";
}

// The same race on real threads, many times. It catches a broken swap only in rounds where
// both threads are on a CPU at once (not every run on a loaded machine); the test above
// always does.
TEST(InFlightCall, ReturnAndAbandonRacedFromTwoThreadsExactlyOneWins) {
    constexpr int kCalls = 100000;
    std::vector<std::unique_ptr<InFlight>> flights;
    for (int i = 0; i < kCalls; ++i) {
        flights.push_back(flight());
        flights.back()->call_started(kOverdue);
    }
    std::vector<char> returned(kCalls, 0);
    std::vector<char> abandoned(kCalls, 0);
    SpinStart start;
    {
        std::jthread worker([&] {
            for (int i = 0; i < kCalls; ++i) {
                start.arrive_and_wait(i);
                returned[i] = flights[i]->call_returned() ? 1 : 0;
            }
        });
        std::jthread host([&] {
            for (int i = 0; i < kCalls; ++i) {
                start.arrive_and_wait(i);
                abandoned[i] = flights[i]->try_abandon(kNow) ? 1 : 0;
            }
        });
    }
    int both = 0;
    int neither = 0;
    for (int i = 0; i < kCalls; ++i) {
        both += returned[i] && abandoned[i] ? 1 : 0;
        neither += !returned[i] && !abandoned[i] ? 1 : 0;
    }
    EXPECT_EQ(both, 0) << "a call both returned and abandoned: its late result would be written";
    EXPECT_EQ(neither, 0) << "a call neither returned nor abandoned";
}

// The host read call 1 as running and overdue; before its compare-and-swap the worker ended
// call 1 and started call 2 of the same event (the next handler). Call 2 is overdue too, so
// only the call number in the compared word tells the two apart.
TEST(InFlightCall, AnAbandonAimedAtAnEndedCallCannotEndTheNextOne) {
    auto f = flight();
    f->call_started(kOverdue);
    const auto seen = f->seen_call();
    ASSERT_TRUE(f->call_returned());
    f->call_started(kOverdue);
    EXPECT_FALSE(f->try_abandon(kNow, seen)) << "the host ended a call it never looked at";
    EXPECT_TRUE(f->call_returned()) << "call 2 still runs and returns";
}

TEST(InFlightCall, AnAbandonAimedAtTheRunningCallEndsIt) {
    auto f = flight();
    f->call_started(kOverdue);
    const auto seen = f->seen_call();
    EXPECT_TRUE(f->try_abandon(kNow, seen));
    EXPECT_FALSE(f->call_returned());
}

TEST(InFlightTable, KeysLeasesByTokenSoAReclaimSitsBesideTheOldAttempt) {
    InFlightTable table;
    auto old_attempt = table.add({"e1", "t1"}, "A", 1);
    auto new_attempt = table.add({"e1", "t2"}, "A", 2, true);
    EXPECT_EQ(table.size(), 2U);
    EXPECT_EQ(new_attempt->lease.lease_token, "t2");
    EXPECT_EQ(new_attempt->event_type, "A");
    EXPECT_EQ(new_attempt->attempt, 2);
    EXPECT_TRUE(new_attempt->suspect);
    EXPECT_FALSE(old_attempt->suspect);

    table.remove({"e1", "t1"});
    ASSERT_EQ(table.size(), 1U);
    const auto leases = table.leases();
    ASSERT_EQ(leases.size(), 1U);
    EXPECT_EQ(leases[0].lease_token, "t2");
    const auto snapshot = table.snapshot();
    ASSERT_EQ(snapshot.size(), 1U);
    EXPECT_EQ(snapshot[0], new_attempt);

    table.remove({"e9", "unknown"});
    EXPECT_EQ(table.size(), 1U) << "removing an unknown lease changes nothing";
}

TEST(InFlightTable, MarkLostExceptMarksCheckedLeasesThatWereNotKept) {
    InFlightTable table;
    auto lost = table.add({"e1", "t1"}, "A", 1);
    auto kept = table.add({"e2", "t2"}, "A", 1);
    auto unchecked = table.add({"e3", "t3"}, "A", 1);
    auto finishing = table.add({"e4", "t4"}, "A", 1);
    finishing->finishing = true;
    const std::vector<lease::LeaseRef> checked{{"e1", "t1"}, {"e2", "t2"}, {"e4", "t4"}, {"e5", "gone"}};

    EXPECT_EQ(table.mark_lost_except(checked, {"t2"}), 1);
    EXPECT_TRUE(lost->lost);
    EXPECT_FALSE(kept->lost);
    EXPECT_FALSE(unchecked->lost) << "only leases the heartbeat checked can be lost";
    EXPECT_FALSE(finishing->lost) << "a finishing attempt's fenced write decides, not the heartbeat";

    EXPECT_EQ(table.mark_lost_except(checked, {"t2"}), 0) << "a lease is counted lost once";
}

}  // namespace
}  // namespace outbox::dispatch
