#pragma once

#include <atomic>
#include <chrono>
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

    /// Who ends the handler call running for this event: the worker when handle() returns,
    /// or the host when it does not return by its deadline plus outbox.abandon_grace. The
    /// compare-and-swap makes the two exclusive, so an abandoned call's late result can
    /// never be written.
    enum class Call { Idle, Running, Returned, Abandoned };

    void call_started(std::chrono::steady_clock::time_point abandon_at) noexcept {
        abandon_at_.store(abandon_at.time_since_epoch().count());
        call_.store(Call::Running);
    }
    /// Worker side; false when the host abandoned the call meanwhile.
    bool call_returned() noexcept {
        Call running = Call::Running;
        return call_.compare_exchange_strong(running, Call::Returned);
    }
    /// Host side; true when the running call was overdue and is now abandoned.
    bool try_abandon(std::chrono::steady_clock::time_point now) noexcept {
        if (call_.load() != Call::Running || now.time_since_epoch().count() < abandon_at_.load()) return false;
        Call running = Call::Running;
        return call_.compare_exchange_strong(running, Call::Abandoned);
    }
    /// The pooled connection of the running call's ctx.db() transaction, while it has one.
    void attach_connection(db::ConnectionPool::Handle* handle) {
        std::lock_guard lock(db_mutex_);
        db_ = handle;
    }
    void detach_connection() {
        std::lock_guard lock(db_mutex_);
        db_ = nullptr;
    }
    /// An abandoned call must not keep its connection, transaction and locks while its
    /// thread is stuck: the session is ended and the pool slot given back.
    void forfeit_connection() {
        std::lock_guard lock(db_mutex_);
        if (db_ != nullptr) db_->forfeit();
    }

    /// At a stop that cannot wait any longer: abandons the running call whatever its deadline.
    bool force_abandon() noexcept {
        Call running = Call::Running;
        return call_.compare_exchange_strong(running, Call::Abandoned);
    }

private:
    std::atomic<Call> call_{Call::Idle};
    std::mutex db_mutex_;
    db::ConnectionPool::Handle* db_ = nullptr;
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
