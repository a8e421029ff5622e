#pragma once
// A value computed at most once per period for each key, with at most one computation in
// flight per key: a caller during a computation gets the previous value, or (before the
// first one finished) waits for it, bounded. Readers that poll (Prometheus scrapers,
// consoles refreshing every few seconds) then cannot multiply a costly query.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace outbox::admin {

template <class Value>
class SharedResult {
public:
    /// At most `max_keys` values are kept; the least recently computed goes first.
    explicit SharedResult(std::size_t max_keys) : max_keys_(max_keys) {}

    /// The value for `key` computed less than `period` ago, or a new one from `compute`
    /// (nullopt = failed; a failure is not kept, the next caller tries again).
    std::optional<Value> get(const std::string& key, std::chrono::milliseconds period, std::chrono::milliseconds wait,
                             const std::function<std::optional<Value>()>& compute) {
        std::unique_lock lock(mutex_);
        Entry& entry = entries_[key];
        const auto now = std::chrono::steady_clock::now();
        if (entry.value && now - entry.computed_at < period) return entry.value;
        if (entry.computing) {
            if (entry.value) return entry.value;
            done_.wait_for(lock, wait, [&] { return !entries_.at(key).computing; });
            return entries_.at(key).value;
        }
        entry.computing = true;
        lock.unlock();
        std::optional<Value> value;
        try {
            value = compute();
        } catch (...) {
            finish(key, std::nullopt);
            throw;
        }
        finish(key, value);
        return value;
    }

private:
    struct Entry {
        bool computing = false;
        std::chrono::steady_clock::time_point computed_at{};
        std::optional<Value> value;
    };

    void finish(const std::string& key, const std::optional<Value>& value) {
        const std::lock_guard lock(mutex_);
        Entry& entry = entries_.at(key);
        entry.computing = false;
        if (value) {
            entry.value = value;
            entry.computed_at = std::chrono::steady_clock::now();
        }
        evict();
        done_.notify_all();
    }

    void evict() {
        while (entries_.size() > max_keys_) {
            auto oldest = entries_.end();
            for (auto it = entries_.begin(); it != entries_.end(); ++it) {
                if (it->second.computing) continue;
                if (oldest == entries_.end() || it->second.computed_at < oldest->second.computed_at) oldest = it;
            }
            if (oldest == entries_.end()) return;
            entries_.erase(oldest);
        }
    }

    const std::size_t max_keys_;
    std::mutex mutex_;
    std::condition_variable done_;
    std::map<std::string, Entry> entries_;
};

}  // namespace outbox::admin
