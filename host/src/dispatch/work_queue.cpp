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
            if (item.suspect) {
                suspect_ = std::move(item);
            } else {
                items_.push_back(std::move(item));
            }
        }
    }
    changed_.notify_all();
}

std::optional<Work> WorkQueue::pop(Lane lane) {
    std::unique_lock lock(mutex_);
    if (lane == Lane::Suspect) {
        changed_.wait(lock, [&] { return closed_ || suspect_.has_value(); });
        if (closed_ || !suspect_) return std::nullopt;
        std::optional<Work> item = std::move(suspect_);
        suspect_.reset();
        suspect_busy_ = true;
        return item;
    }
    changed_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (closed_ || items_.empty()) return std::nullopt;
    Work item = std::move(items_.front());
    items_.pop_front();
    ++busy_;
    return item;
}

std::vector<Work> WorkQueue::take_matching(const std::function<bool(const Work&)>& match, int max) {
    std::vector<Work> taken;
    std::lock_guard lock(mutex_);
    if (closed_) return taken;
    for (auto it = items_.begin(); it != items_.end() && static_cast<int>(taken.size()) < max;) {
        if (!match(*it)) {
            ++it;
            continue;
        }
        taken.push_back(std::move(*it));
        it = items_.erase(it);
        ++busy_;
    }
    return taken;
}

bool WorkQueue::suspect_lane_free() const {
    std::lock_guard lock(mutex_);
    return !closed_ && !suspect_ && !suspect_busy_;
}

void WorkQueue::done(const std::string& event_type, bool suspect) {
    {
        std::lock_guard lock(mutex_);
        if (suspect) {
            suspect_busy_ = false;
        } else {
            --busy_;
        }
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
        if (suspect_) {
            --per_type_[suspect_->claimed.event.type];
            unstarted.push_back(std::move(*suspect_));
            suspect_.reset();
        }
    }
    changed_.notify_all();
    return unstarted;
}

bool WorkQueue::wait_idle(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock lock(mutex_);
    return changed_.wait_until(lock, deadline, [&] { return busy_ == 0 && !suspect_busy_ && items_.empty() && !suspect_; });
}

int WorkQueue::busy() const {
    std::lock_guard lock(mutex_);
    return busy_ + (suspect_busy_ ? 1 : 0);
}

int WorkQueue::queued() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(items_.size()) + (suspect_ ? 1 : 0);
}

bool WorkQueue::idle() const {
    std::lock_guard lock(mutex_);
    return busy_ == 0 && items_.empty() && !suspect_busy_ && !suspect_;
}

int WorkQueue::in_flight_of(const std::string& event_type) const {
    std::lock_guard lock(mutex_);
    const auto found = per_type_.find(event_type);
    return found == per_type_.end() ? 0 : found->second;
}

}  // namespace outbox::dispatch
