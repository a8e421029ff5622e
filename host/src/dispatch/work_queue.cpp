#include "dispatch/work_queue.hpp"

namespace outbox::dispatch {

int WorkQueue::free_slots() const {
    std::lock_guard lock(mutex_);
    return closed_ ? 0 : capacity_ - static_cast<int>(items_.size()) - busy_;
}

void WorkQueue::push(std::vector<Work> items) {
    {
        std::lock_guard lock(mutex_);
        for (auto& item : items) items_.push_back(std::move(item));
    }
    changed_.notify_all();
}

std::optional<Work> WorkQueue::pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return std::nullopt;
    Work item = std::move(items_.front());
    items_.pop_front();
    ++busy_;
    return item;
}

void WorkQueue::done() {
    {
        std::lock_guard lock(mutex_);
        --busy_;
    }
    changed_.notify_all();
}

std::vector<Work> WorkQueue::close() {
    std::vector<Work> unstarted;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        for (auto& item : items_) unstarted.push_back(std::move(item));
        items_.clear();
    }
    changed_.notify_all();
    return unstarted;
}

bool WorkQueue::wait_idle(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [&] { return busy_ == 0 && items_.empty(); });
}

int WorkQueue::busy() const {
    std::lock_guard lock(mutex_);
    return busy_;
}

}  // namespace outbox::dispatch
