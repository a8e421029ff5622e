#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace outbox::admin {

/// A fixed number of worker threads with a bounded backlog: when `max_queued` jobs already
/// wait, try_enqueue() refuses (the caller answers 503 BUSY) instead of growing memory
/// without bound.
class BoundedTaskQueue {
public:
    BoundedTaskQueue(std::size_t threads, std::size_t max_queued);
    ~BoundedTaskQueue();
    BoundedTaskQueue(const BoundedTaskQueue&) = delete;
    BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

    /// False when the backlog is full or the queue is shutting down.
    bool try_enqueue(std::function<void()> job);
    /// Runs what is queued, then joins the threads. Idempotent.
    void shutdown();

private:
    void work();

    std::size_t max_queued_;
    std::mutex mutex_;
    std::condition_variable has_job_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace outbox::admin
