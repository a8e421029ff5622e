#include "admin/shared_result.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "support/blocked_thread.hpp"

namespace outbox::admin {
namespace {

using namespace std::chrono_literals;

constexpr auto kLong = std::chrono::milliseconds(1h);

// Holds a computation until the test opens it; says when the computation began.
class HeldComputation {
public:
    std::optional<int> run(int value) {
        std::unique_lock lock(mutex_);
        started_ = true;
        changed_.notify_all();
        changed_.wait_for(lock, 5s, [&] { return open_; });
        return value;
    }
    bool wait_started() {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, 5s, [&] { return started_; });
    }
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool started_ = false;
    bool open_ = false;
};

TEST(SharedResult, ComputesOncePerPeriod) {
    SharedResult<int> cache(4);
    int computed = 0;
    const auto compute = [&]() -> std::optional<int> { return ++computed; };
    EXPECT_EQ(cache.get("k", kLong, 0ms, compute), 1);
    EXPECT_EQ(cache.get("k", kLong, 0ms, compute), 1) << "a fresh value is served as it is";
    EXPECT_EQ(computed, 1);
    EXPECT_EQ(cache.get("k", 0ms, 0ms, compute), 2) << "a value older than the period is computed again";
    EXPECT_EQ(cache.get("other", kLong, 0ms, compute), 3) << "each key has its own value";
}

TEST(SharedResult, AFailureIsNotKept) {
    SharedResult<int> cache(4);
    int calls = 0;
    EXPECT_FALSE(cache.get("k", kLong, 0ms, [&]() -> std::optional<int> {
        ++calls;
        return std::nullopt;
    }));
    EXPECT_THROW(cache.get("k", kLong, 0ms,
                           [&]() -> std::optional<int> {
                               ++calls;
                               throw std::runtime_error("query failed");
                           }),
                 std::runtime_error);
    EXPECT_EQ(cache.get("k", kLong, 0ms, [&]() -> std::optional<int> { return ++calls; }), 3)
        << "after a failure and a throw the next caller computes again";
}

TEST(SharedResult, CallersDuringTheFirstComputationWaitAndShareItsValue) {
    constexpr int kWaiters = 3;
    SharedResult<int> cache(4);
    HeldComputation held;
    std::atomic<int> computed{0};
    std::promise<std::optional<int>> first_result;
    std::jthread first([&] {
        first_result.set_value(cache.get("k", kLong, 5s, [&] {
            ++computed;
            return held.run(42);
        }));
    });
    ASSERT_TRUE(held.wait_started());

    std::vector<test::ThreadIdSlot> ids(kWaiters);
    std::vector<std::promise<std::optional<int>>> results(kWaiters);
    std::vector<std::jthread> waiters;
    for (int i = 0; i < kWaiters; ++i) {
        waiters.emplace_back([&, i] {
            ids[i].publish();
            results[i].set_value(cache.get("k", kLong, 5s, [&]() -> std::optional<int> {
                ++computed;
                return 7;
            }));
        });
    }
    bool all_blocked = true;
    for (auto& id : ids) all_blocked = test::wait_until_blocked(id.wait()) && all_blocked;
    held.open();
    ASSERT_TRUE(all_blocked) << "a caller during the first computation waits for it";
    EXPECT_EQ(first_result.get_future().get(), 42);
    for (auto& result : results) EXPECT_EQ(result.get_future().get(), 42) << "every waiter gets the one value";
    EXPECT_EQ(computed.load(), 1) << "one computation in flight per key";
}

TEST(SharedResult, ACallerDuringARecomputationGetsThePreviousValue) {
    SharedResult<int> cache(4);
    ASSERT_EQ(cache.get("k", kLong, 0ms, [] { return std::optional<int>(1); }), 1);
    HeldComputation held;
    std::promise<std::optional<int>> refreshed;
    std::jthread refresher([&] { refreshed.set_value(cache.get("k", 0ms, 5s, [&] { return held.run(2); })); });
    ASSERT_TRUE(held.wait_started());
    int computed = 0;
    // An hour's wait: a caller that waited for the recomputation would see its value instead.
    EXPECT_EQ(cache.get("k", 0ms, kLong,
                        [&]() -> std::optional<int> {
                            ++computed;
                            return 3;
                        }),
              1)
        << "the stale value is served at once, without a second computation";
    held.open();
    EXPECT_EQ(refreshed.get_future().get(), 2);
    EXPECT_EQ(computed, 0);
    EXPECT_EQ(cache.get("k", kLong, 0ms, [] { return std::optional<int>(4); }), 2) << "the new value is kept";
}

TEST(SharedResult, AWaiterGivesUpAfterItsWait) {
    SharedResult<int> cache(4);
    HeldComputation held;
    std::jthread first([&] { cache.get("k", kLong, 5s, [&] { return held.run(1); }); });
    ASSERT_TRUE(held.wait_started());
    int computed = 0;
    EXPECT_FALSE(cache.get("k", kLong, 10ms,
                           [&]() -> std::optional<int> {
                               ++computed;
                               return 2;
                           }))
        << "no value yet and the wait is over: nothing, and no second computation";
    EXPECT_EQ(computed, 0);
    held.open();
}

TEST(SharedResult, KeepsAtMostMaxKeysDroppingTheOldestComputed) {
    SharedResult<int> cache(2);
    int computed = 0;
    const auto compute = [&]() -> std::optional<int> { return ++computed; };
    cache.get("a", kLong, 0ms, compute);
    cache.get("b", kLong, 0ms, compute);
    cache.get("c", kLong, 0ms, compute);
    ASSERT_EQ(computed, 3);
    EXPECT_EQ(cache.get("c", kLong, 0ms, compute), 3);
    EXPECT_EQ(cache.get("b", kLong, 0ms, compute), 2) << "the two newest are kept";
    EXPECT_EQ(cache.get("a", kLong, 0ms, compute), 4) << "the oldest was dropped and is computed again";
}

}  // namespace
}  // namespace outbox::admin
