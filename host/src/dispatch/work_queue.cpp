#include "dispatch/work_queue.hpp"

namespace outbox::dispatch {

int WorkQueue::free_slots() const {
    std::lock_guard lock(mutex_);
    return closed_ ? 0 : capacity_ - static_cast<int>(items_.size()) - busy_;
}

void WorkQueue::push(std::vector<Work> items) {
    {
        std::lock_guard lock(mutex_);
        for (auto& item : items) {
            ++per_type_[item.claimed.event.type];
            items_.push_back(std::move(item));
        }
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

void WorkQueue::done(const std::string& event_type) {
    {
        std::lock_guard lock(mutex_);
        --busy_;
        --per_type_[event_type];
    }
    changed_.notify_all();
}

std::vector<Work> WorkQueue::close() {
    std::vector<Work> unstarted;
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
        for (auto& item : items_) {
            --per_type_[item.claimed.event.type];
            unstarted.push_back(std::move(item));
        }
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

int WorkQueue::queued() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(items_.size());
}

bool WorkQueue::idle() const {
    std::lock_guard lock(mutex_);
    return busy_ == 0 && items_.empty();
}

int WorkQueue::in_flight_of(const std::string& event_type) const {
    std::lock_guard lock(mutex_);
    const auto found = per_type_.find(event_type);
    return found == per_type_.end() ? 0 : found->second;
}

}  // namespace outbox::dispatch
