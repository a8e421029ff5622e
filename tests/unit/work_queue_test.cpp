#include "dispatch/work_queue.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/blocked_thread.hpp"

namespace outbox::dispatch {
namespace {

using namespace std::chrono_literals;
using Lane = WorkQueue::Lane;

Work work(const std::string& id, const std::string& type, bool suspect = false) {
    Work item;
    item.claimed.event.id = id;
    item.claimed.event.type = type;
    item.suspect = suspect;
    return item;
}

std::vector<std::string> ids(const std::vector<Work>& items) {
    std::vector<std::string> result;
    for (const auto& item : items) result.push_back(item.claimed.event.id);
    return result;
}

TEST(WorkQueue, FreeSlotsCountQueuedAndRunningEvents) {
    WorkQueue queue(3);
    EXPECT_EQ(queue.free_slots(), 3);
    queue.push({work("e1", "A"), work("e2", "A")});
    EXPECT_EQ(queue.free_slots(), 1);
    auto first = queue.pop();
    ASSERT_TRUE(first);
    EXPECT_EQ(queue.free_slots(), 1) << "a running event still holds its slot";
    EXPECT_EQ(queue.busy(), 1);
    EXPECT_EQ(queue.queued(), 1);
    queue.done(*first);
    EXPECT_EQ(queue.free_slots(), 2) << "done() gives the slot back";
    auto second = queue.pop();
    ASSERT_TRUE(second);
    queue.done(*second);
    EXPECT_EQ(queue.free_slots(), 3);
    EXPECT_TRUE(queue.idle());
}

TEST(WorkQueue, PopHandsOutNormalEventsInOrder) {
    WorkQueue queue(4);
    queue.push({work("e1", "A"), work("e2", "B")});
    queue.push({work("e3", "A")});
    for (const std::string expected : {"e1", "e2", "e3"}) {
        auto item = queue.pop();
        ASSERT_TRUE(item);
        EXPECT_EQ(item->claimed.event.id, expected);
    }
}

TEST(WorkQueue, EachLanePopsOnlyItsOwnEvents) {
    WorkQueue queue(2);
    queue.push({work("suspect", "A", true), work("normal", "A")});
    EXPECT_EQ(queue.queued(), 2);
    ASSERT_FALSE(queue.suspect_lane_free()) << "the suspect waits in its own lane";
    auto normal = queue.pop(Lane::Normal);
    ASSERT_TRUE(normal);
    EXPECT_EQ(normal->claimed.event.id, "normal") << "the normal lane skips the queued suspect";
    auto suspect = queue.pop(Lane::Suspect);
    ASSERT_TRUE(suspect);
    EXPECT_EQ(suspect->claimed.event.id, "suspect");
    EXPECT_TRUE(suspect->suspect);
    EXPECT_EQ(queue.queued(), 0);
}

TEST(WorkQueue, ASuspectRunsOutsideTheCapacityOneAtATime) {
    WorkQueue queue(1);
    queue.push({work("normal", "A")});
    auto normal = queue.pop();
    ASSERT_TRUE(normal);
    ASSERT_EQ(queue.free_slots(), 0);
    EXPECT_TRUE(queue.suspect_lane_free()) << "a full normal lane does not close the suspect lane";

    queue.push({work("suspect", "A", true)});
    ASSERT_FALSE(queue.suspect_lane_free()) << "a queued suspect takes the lane";
    EXPECT_EQ(queue.free_slots(), 0) << "the suspect takes no normal slot";
    auto suspect = queue.pop(Lane::Suspect);
    ASSERT_TRUE(suspect);
    EXPECT_FALSE(queue.suspect_lane_free()) << "a running suspect takes the lane";
    EXPECT_EQ(queue.busy(), 2);
    EXPECT_EQ(queue.free_slots(), 0);

    queue.done(*normal);
    EXPECT_EQ(queue.free_slots(), 1);
    EXPECT_FALSE(queue.suspect_lane_free());
    queue.done(*suspect);
    EXPECT_TRUE(queue.suspect_lane_free());
    EXPECT_EQ(queue.free_slots(), 1) << "the suspect's done() frees no normal slot";
    EXPECT_TRUE(queue.idle());
}

TEST(WorkQueue, CloseReturnsTheUnstartedEventsAndHandsOutNoMore) {
    WorkQueue queue(4);
    queue.push({work("e1", "A"), work("e2", "A"), work("e3", "B"), work("s1", "B", true)});
    auto running = queue.pop();
    ASSERT_TRUE(running);

    const auto unstarted = queue.close();
    EXPECT_EQ(ids(unstarted), (std::vector<std::string>{"e2", "e3", "s1"}));
    EXPECT_EQ(queue.queued(), 0);
    EXPECT_EQ(queue.free_slots(), 0) << "a closed queue invites no claims";
    EXPECT_FALSE(queue.suspect_lane_free());
    EXPECT_FALSE(queue.pop(Lane::Normal));
    EXPECT_FALSE(queue.pop(Lane::Suspect));
    EXPECT_EQ(queue.busy(), 1) << "the started event is still running";

    queue.push({work("late", "A")});
    EXPECT_FALSE(queue.pop()) << "items pushed after close are not handed out";
    EXPECT_EQ(ids(queue.close()), (std::vector<std::string>{"late"})) << "they wait for the next close()";
    queue.done(*running);
    EXPECT_TRUE(queue.idle());
}

// pop(lane) on a thread of its own, so that a test can act once that thread sleeps in its wait.
class BlockedPop {
public:
    BlockedPop(WorkQueue& queue, Lane lane)
        : queue_(queue), result_(popped_.get_future()), popper_([this, lane] {
              id_.publish();
              popped_.set_value(queue_.pop(lane));
          }) {}
    ~BlockedPop() {
        if (returned_) return;
        // Never woken (a broken queue): close and push, so the thread ends either way.
        queue_.close();
        queue_.push({});
    }
    BlockedPop(const BlockedPop&) = delete;
    BlockedPop& operator=(const BlockedPop&) = delete;

    bool asleep() { return test::wait_until_blocked(id_.wait()); }
    /// What pop() returned, or nullopt when it did not return within five seconds.
    std::optional<std::optional<Work>> result() {
        if (result_.wait_for(5s) != std::future_status::ready) return std::nullopt;
        returned_ = true;
        return result_.get();
    }

private:
    WorkQueue& queue_;
    test::ThreadIdSlot id_;
    std::promise<std::optional<Work>> popped_;
    std::future<std::optional<Work>> result_;
    bool returned_ = false;
    std::jthread popper_;
};

void expect_close_wakes_blocked_pop(Lane lane) {
    WorkQueue queue(1);
    BlockedPop pop(queue, lane);
    ASSERT_TRUE(pop.asleep()) << "pop() on an empty queue blocks";
    EXPECT_TRUE(queue.close().empty());
    const auto result = pop.result();
    ASSERT_TRUE(result) << "close() must wake a blocked pop()";
    EXPECT_FALSE(*result);
}

TEST(WorkQueue, CloseWakesABlockedNormalPop) { expect_close_wakes_blocked_pop(Lane::Normal); }

TEST(WorkQueue, CloseWakesABlockedSuspectPop) { expect_close_wakes_blocked_pop(Lane::Suspect); }

TEST(WorkQueue, PushWakesABlockedPop) {
    WorkQueue queue(1);
    BlockedPop pop(queue, Lane::Normal);
    ASSERT_TRUE(pop.asleep()) << "pop() on an empty queue blocks";
    queue.push({work("e1", "A")});
    const auto result = pop.result();
    ASSERT_TRUE(result) << "push() must wake a blocked pop()";
    ASSERT_TRUE(*result);
    EXPECT_EQ((*result)->claimed.event.id, "e1");
}

TEST(WorkQueue, WaitIdleTimesOutWhileAnEventIsQueuedOrRunning) {
    WorkQueue queue(2);
    EXPECT_TRUE(queue.wait_idle(std::chrono::steady_clock::now())) << "an empty queue is idle at once";

    queue.push({work("e1", "A")});
    EXPECT_FALSE(queue.wait_idle(std::chrono::steady_clock::now() + 10ms)) << "a queued event is not idle";
    auto item = queue.pop();
    ASSERT_TRUE(item);
    EXPECT_FALSE(queue.wait_idle(std::chrono::steady_clock::now() + 10ms)) << "a running event is not idle";
    queue.done(*item);

    queue.push({work("s1", "A", true)});
    ASSERT_FALSE(queue.suspect_lane_free());
    auto suspect = queue.pop(Lane::Suspect);
    ASSERT_TRUE(suspect);
    EXPECT_FALSE(queue.wait_idle(std::chrono::steady_clock::now() + 10ms)) << "a running suspect is not idle";
    queue.done(*suspect);
    EXPECT_TRUE(queue.wait_idle(std::chrono::steady_clock::now()));
}

TEST(WorkQueue, WaitIdleReturnsWhenTheLastRunningEventIsDone) {
    WorkQueue queue(1);
    queue.push({work("e1", "A")});
    auto item = queue.pop();
    ASSERT_TRUE(item);
    test::ThreadIdSlot waiter_id;
    std::promise<bool> idle;
    auto result = idle.get_future();
    // A deadline far beyond the test's own wait: only a wake-up can end the wait in time.
    std::jthread waiter([&] {
        waiter_id.publish();
        idle.set_value(queue.wait_idle(std::chrono::steady_clock::now() + 1h));
    });
    const bool blocked = test::wait_until_blocked(waiter_id.wait());
    queue.done(*item);
    const bool woke = result.wait_for(5s) == std::future_status::ready;
    if (!woke) queue.push({});  // wakes it anyway, so the test ends
    ASSERT_TRUE(blocked) << "wait_idle() with an event running blocks";
    ASSERT_TRUE(woke) << "done() of the last running event must wake wait_idle()";
    EXPECT_TRUE(result.get());
}

TEST(WorkQueue, InFlightOfCountsQueuedAndRunningEventsPerType) {
    WorkQueue queue(4);
    queue.push({work("a1", "A"), work("a2", "A"), work("b1", "B"), work("s1", "B", true)});
    EXPECT_EQ(queue.in_flight_of("A"), 2);
    EXPECT_EQ(queue.in_flight_of("B"), 2) << "the suspect counts for its type";
    EXPECT_EQ(queue.in_flight_of("C"), 0);

    auto a1 = queue.pop();
    ASSERT_TRUE(a1);
    EXPECT_EQ(queue.in_flight_of("A"), 2) << "a running event still counts";
    queue.done(*a1);
    EXPECT_EQ(queue.in_flight_of("A"), 1);

    ASSERT_FALSE(queue.suspect_lane_free());
    auto s1 = queue.pop(Lane::Suspect);
    ASSERT_TRUE(s1);
    queue.done("B", true);
    EXPECT_EQ(queue.in_flight_of("B"), 1);

    queue.close();
    EXPECT_EQ(queue.in_flight_of("A"), 0) << "close() uncounts what it returns";
    EXPECT_EQ(queue.in_flight_of("B"), 0);
}

}  // namespace
}  // namespace outbox::dispatch
