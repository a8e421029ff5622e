#include "admin/bounded_task_queue.hpp"

namespace outbox::admin {

BoundedTaskQueue::BoundedTaskQueue(std::size_t threads, std::size_t max_queued)
    : max_queued_(max_queued < 1 ? 1 : max_queued) {
    if (threads < 1) threads = 1;
    threads_.reserve(threads);
    for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

bool BoundedTaskQueue::try_enqueue(std::function<void()> job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || jobs_.size() >= max_queued_) return false;
        jobs_.push_back(std::move(job));
    }
    has_job_.notify_one();
    return true;
}

void BoundedTaskQueue::shutdown() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_ && threads_.empty()) return;
        stopping_ = true;
    }
    has_job_.notify_all();
    for (auto& thread : threads_) {
        if (thread.joinable()) thread.join();
    }
    threads_.clear();
}

void BoundedTaskQueue::work() {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lock(mutex_);
            has_job_.wait(lock, [&] { return !jobs_.empty() || stopping_; });
            if (jobs_.empty()) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
        }
        job();
    }
}

}  // namespace outbox::admin
