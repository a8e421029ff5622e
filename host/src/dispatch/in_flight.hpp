#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "db/connection_pool.hpp"
#include "lease/lease_store.hpp"

namespace outbox::dispatch {

/// One claimed event from claim until its outcome is persisted (or its lease is lost).
struct InFlight {
    InFlight(lease::LeaseRef ref, std::string type, int attempt_count, bool is_suspect)
        : lease(std::move(ref)), event_type(std::move(type)), attempt(attempt_count), suspect(is_suspect) {}
    const lease::LeaseRef lease;
    const std::string event_type;
    const int attempt;
    const bool suspect;  // runs in the suspect lane
    std::atomic<bool> lost{false};       // set by the heartbeat; read by ctx.cancelled()
    std::atomic<bool> finishing{false};  // outcome handed to the completer; the fenced write decides
    /// This attempt's calls that outbox_attempt records, stored with its outcome. Written by
    /// the worker thread running the event, or for a commit group's member under the group's
    /// mutex (its abandon hook runs on the deadline watch).
    std::vector<lease::AttemptCall> calls;

    /// Who ends the handler call running for this event: the worker when handle() returns,
    /// or the host when it does not return by its deadline plus outbox.abandon_grace. The
    /// compare-and-swap makes the two exclusive, so an abandoned call's late result can
    /// never be written.
    enum class Call : std::uint64_t { Idle, Running, Returned, Abandoned };

    void call_started(std::chrono::steady_clock::time_point abandon_at) noexcept {
        // The deadline first, then the state with a new call number: whoever reads this
        // call's state reads at least this call's deadline.
        abandon_at_.store(abandon_at.time_since_epoch().count());
        call_.store(pack(number(call_.load()) + 1, Call::Running));
    }
    /// Worker side; false when the host abandoned the call meanwhile.
    bool call_returned() noexcept { return end(Call::Returned, nullptr, call_.load()); }
    /// Host side; true when the running call was overdue and is now abandoned.
    bool try_abandon(std::chrono::steady_clock::time_point now) noexcept { return try_abandon(now, seen_call()); }

    /// The call running now, as one compared word: try_abandon(now) in two steps, so that a
    /// test can put the worker's return and next call between them.
    struct SeenCall {
        std::uint64_t word;
    };
    [[nodiscard]] SeenCall seen_call() const noexcept { return {call_.load()}; }
    /// Abandons the call `seen` was taken of if it still runs and is overdue; never a later call.
    bool try_abandon(std::chrono::steady_clock::time_point now, SeenCall seen) noexcept {
        return end(Call::Abandoned, &now, seen.word);
    }
    /// At a stop that cannot wait any longer: abandons the running call whatever its deadline.
    bool force_abandon() noexcept { return end(Call::Abandoned, nullptr, call_.load()); }

    /// The pooled connection of the running call's ctx.db() transaction, while it has one.
    void attach_connection(db::ConnectionPool::Handle* handle) {
        std::lock_guard lock(db_mutex_);
        db_ = handle;
    }
    void detach_connection() {
        std::lock_guard lock(db_mutex_);
        db_ = nullptr;
    }
    /// A call in a commit group shares its group's transaction: abandoning it runs `hook`
    /// (which commits the rest of the group without it) instead of ending a session.
    void attach_abandon_hook(std::function<void()> hook) {
        std::lock_guard lock(db_mutex_);
        abandon_hook_ = std::move(hook);
    }
    void detach_abandon_hook() {
        std::lock_guard lock(db_mutex_);
        abandon_hook_ = nullptr;
    }
    /// An abandoned call must not keep its connection, transaction and locks while its
    /// thread is stuck: the session is ended and the pool slot given back (or, in a commit
    /// group, its savepoint rolled back and the group committed without it).
    void forfeit_connection() {
        std::function<void()> hook;
        {
            std::lock_guard lock(db_mutex_);
            if (db_ != nullptr) db_->forfeit();
            hook = abandon_hook_;
        }
        if (hook) hook();
    }

private:
    // The call's number and state in one word, so a compare-and-swap can only end the call
    // it looked at, never the next handler's call of the same event.
    static constexpr std::uint64_t pack(std::uint64_t n, Call call) noexcept {
        return (n << 2) | static_cast<std::uint64_t>(call);
    }
    static constexpr std::uint64_t number(std::uint64_t word) noexcept { return word >> 2; }
    static constexpr Call state(std::uint64_t word) noexcept { return static_cast<Call>(word & 3); }
    bool end(Call to, const std::chrono::steady_clock::time_point* overdue_at, std::uint64_t word) noexcept {
        if (state(word) != Call::Running) return false;
        if (overdue_at != nullptr && overdue_at->time_since_epoch().count() < abandon_at_.load()) return false;
        return call_.compare_exchange_strong(word, pack(number(word), to));
    }

    std::atomic<std::uint64_t> call_{0};
    std::mutex db_mutex_;
    db::ConnectionPool::Handle* db_ = nullptr;
    std::function<void()> abandon_hook_;
    std::atomic<std::chrono::steady_clock::rep> abandon_at_{0};
};

/// The leases this host holds. The heartbeat extends them; the completer removes them once
/// their outcome is stored. Thread-safe.
class InFlightTable {
public:
    std::shared_ptr<InFlight> add(lease::LeaseRef ref, std::string event_type, int attempt, bool suspect = false);
    [[nodiscard]] std::vector<std::shared_ptr<InFlight>> snapshot() const;
    void remove(const lease::LeaseRef& ref);
    [[nodiscard]] std::vector<lease::LeaseRef> leases() const;
    /// Marks every lease in `checked` whose token is not in `kept_tokens` as lost; returns how many.
    int mark_lost_except(const std::vector<lease::LeaseRef>& checked, const std::vector<std::string>& kept_tokens);
    [[nodiscard]] std::size_t size() const;

private:
    mutable std::mutex mutex_;
    // Keyed by lease token: the same event may be claimed again by this host while an
    // attempt that lost its lease is still unwinding.
    std::unordered_map<std::string, std::shared_ptr<InFlight>> items_;
};

}  // namespace outbox::dispatch
