#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace outbox::admin {

/// httplib's request queue with a fixed number of threads and a bounded backlog: when
/// `max_queued` connections already wait, enqueue() blocks the accept loop, so a flood of
/// connections waits in the kernel's listen backlog instead of growing memory without
/// bound. (httplib 0.11's own ThreadPool queues without limit and cannot refuse a job: a
/// dropped job would leak its socket.)
class BoundedTaskQueue : public httplib::TaskQueue {
public:
    BoundedTaskQueue(std::size_t threads, std::size_t max_queued);
    ~BoundedTaskQueue() override;
    BoundedTaskQueue(const BoundedTaskQueue&) = delete;
    BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

    void enqueue(std::function<void()> job) override;
    /// Runs what is queued, then joins the threads.
    void shutdown() override;

private:
    void work();

    std::size_t max_queued_;
    std::mutex mutex_;
    std::condition_variable has_job_;
    std::condition_variable has_room_;
    std::deque<std::function<void()>> jobs_;
    bool stopping_ = false;
    std::vector<std::thread> threads_;
};

}  // namespace outbox::admin
