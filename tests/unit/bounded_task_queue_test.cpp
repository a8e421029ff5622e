#include "admin/bounded_task_queue.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "support/blocked_thread.hpp"

namespace outbox::admin {
namespace {

using namespace std::chrono_literals;

// A count that tests wait on, bounded, instead of sleeping.
class Counter {
public:
    void add() {
        {
            std::lock_guard lock(mutex_);
            ++value_;
        }
        changed_.notify_all();
    }
    bool wait_for(int value, std::chrono::milliseconds timeout = 5s) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, timeout, [&] { return value_ >= value; });
    }
    int value() {
        std::lock_guard lock(mutex_);
        return value_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    int value_ = 0;
};

// Holds the queue's worker in a job until the test opens it.
class Gate {
public:
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        opened_.notify_all();
    }
    void close() {
        std::lock_guard lock(mutex_);
        open_ = false;
    }
    void pass() {
        std::unique_lock lock(mutex_);
        opened_.wait_for(lock, 5s, [&] { return open_; });
    }

private:
    std::mutex mutex_;
    std::condition_variable opened_;
    bool open_ = false;
};

// A queue of one thread whose worker is held in a job until the test opens the gate, so that
// what the test enqueues stays in the backlog.
class BoundedTaskQueueTest : public ::testing::Test {
protected:
    std::unique_ptr<BoundedTaskQueue> held_queue(std::size_t max_queued) {
        auto queue = std::make_unique<BoundedTaskQueue>(1, max_queued);
        const int entered = entered_.value();
        EXPECT_TRUE(queue->try_enqueue([this] {
            entered_.add();
            gate_.pass();
        }));
        EXPECT_TRUE(entered_.wait_for(entered + 1)) << "the worker never took the first job";
        return queue;
    }
    std::function<void()> counted() {
        return [this] { ran_.add(); };
    }

    Gate gate_;
    Counter entered_;
    Counter ran_;
};

TEST_F(BoundedTaskQueueTest, RefusesAJobWhenTheBacklogIsFull) {
    auto queue = held_queue(2);
    EXPECT_TRUE(queue->try_enqueue(counted()));
    EXPECT_TRUE(queue->try_enqueue(counted()));
    EXPECT_FALSE(queue->try_enqueue(counted())) << "two jobs already wait: the third is refused";
    gate_.open();
    ASSERT_TRUE(ran_.wait_for(2));
    EXPECT_TRUE(queue->try_enqueue(counted())) << "a drained backlog accepts again";
    ASSERT_TRUE(ran_.wait_for(3));
    queue->shutdown();
    EXPECT_EQ(ran_.value(), 3) << "the refused job never ran";
}

TEST_F(BoundedTaskQueueTest, RunsJobsOnAllItsThreadsAtOnce) {
    constexpr int kThreads = 3;
    BoundedTaskQueue queue(kThreads, kThreads);
    for (int i = 0; i < kThreads; ++i) {
        ASSERT_TRUE(queue.try_enqueue([this] {
            entered_.add();
            gate_.pass();
        }));
    }
    EXPECT_TRUE(entered_.wait_for(kThreads)) << "each job blocks its thread: all three run only on three threads";
    gate_.open();
}

// Stops the queue on a thread of its own while its worker is held and three jobs wait, and
// opens the gate only once that thread is blocked in its join.
TEST_F(BoundedTaskQueueTest, ShutdownAndTheDestructorRunTheQueuedJobsFirst) {
    for (const bool destroy : {false, true}) {
        SCOPED_TRACE(destroy ? "destructor" : "shutdown()");
        gate_.close();
        auto queue = held_queue(4);
        const int before = ran_.value();
        for (int i = 0; i < 3; ++i) ASSERT_TRUE(queue->try_enqueue(counted()));
        test::ThreadIdSlot stopper_id;
        std::promise<void> stopped;
        auto result = stopped.get_future();
        std::jthread stopper([&] {
            stopper_id.publish();
            if (destroy) {
                queue.reset();
            } else {
                queue->shutdown();
            }
            stopped.set_value();
        });
        const bool joining = test::wait_until_blocked(stopper_id.wait());
        gate_.open();
        ASSERT_TRUE(joining) << "the stop never reached its join";
        ASSERT_EQ(result.wait_for(5s), std::future_status::ready);
        EXPECT_EQ(ran_.value() - before, 3) << "a stop runs what was queued before it";
    }
}

TEST_F(BoundedTaskQueueTest, AQueueShuttingDownRefusesNewJobs) {
    auto queue = held_queue(4);
    test::ThreadIdSlot stopper_id;
    std::jthread stopper([&] {
        stopper_id.publish();
        queue->shutdown();
    });
    const bool joining = test::wait_until_blocked(stopper_id.wait());
    const bool accepted = queue->try_enqueue(counted());
    gate_.open();
    ASSERT_TRUE(joining) << "the shutdown never reached its join";
    EXPECT_FALSE(accepted) << "a job offered during shutdown is refused, not left behind";
}

TEST_F(BoundedTaskQueueTest, ShutdownIsIdempotentAndLaterJobsAreRefused) {
    BoundedTaskQueue queue(2, 2);
    queue.shutdown();
    queue.shutdown();
    EXPECT_FALSE(queue.try_enqueue(counted()));
    EXPECT_EQ(ran_.value(), 0);
}

}  // namespace
}  // namespace outbox::admin
