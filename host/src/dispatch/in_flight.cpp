#include "dispatch/in_flight.hpp"

#include <unordered_set>

namespace outbox::dispatch {

std::shared_ptr<InFlight> InFlightTable::add(lease::LeaseRef ref, std::string event_type, int attempt, bool suspect) {
    auto item = std::make_shared<InFlight>(std::move(ref), std::move(event_type), attempt, suspect);
    std::lock_guard lock(mutex_);
    items_[item->lease.lease_token] = item;
    return item;
}

void InFlightTable::remove(const lease::LeaseRef& ref) {
    std::lock_guard lock(mutex_);
    items_.erase(ref.lease_token);
}

std::vector<std::shared_ptr<InFlight>> InFlightTable::snapshot() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<InFlight>> result;
    result.reserve(items_.size());
    for (const auto& [token, item] : items_) result.push_back(item);
    return result;
}

std::vector<lease::LeaseRef> InFlightTable::leases() const {
    std::lock_guard lock(mutex_);
    std::vector<lease::LeaseRef> result;
    result.reserve(items_.size());
    for (const auto& [id, item] : items_) result.push_back(item->lease);
    return result;
}

int InFlightTable::mark_lost_except(const std::vector<lease::LeaseRef>& checked,
                                    const std::vector<std::string>& kept_tokens) {
    const std::unordered_set<std::string> keep(kept_tokens.begin(), kept_tokens.end());
    int lost = 0;
    std::lock_guard lock(mutex_);
    for (const auto& ref : checked) {
        if (keep.contains(ref.lease_token)) continue;
        const auto found = items_.find(ref.lease_token);
        if (found != items_.end() && !found->second->finishing && !found->second->lost.exchange(true)) {
            ++lost;
        }
    }
    return lost;
}

std::size_t InFlightTable::size() const {
    std::lock_guard lock(mutex_);
    return items_.size();
}

}  // namespace outbox::dispatch
