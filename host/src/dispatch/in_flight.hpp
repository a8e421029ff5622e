#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lease/lease_store.hpp"

namespace outbox::dispatch {

/// One claimed event from claim until its outcome is persisted (or its lease is lost).
struct InFlight {
    explicit InFlight(lease::LeaseRef ref) : lease(std::move(ref)) {}
    const lease::LeaseRef lease;
    std::atomic<bool> lost{false};       // set by the heartbeat; read by ctx.cancelled()
    std::atomic<bool> finishing{false};  // outcome handed to the completer; the fenced write decides
};

/// The leases this host holds. The heartbeat extends them; the completer removes them once
/// their outcome is stored. Thread-safe.
class InFlightTable {
public:
    std::shared_ptr<InFlight> add(lease::LeaseRef ref);
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
