#include "admin/company_slots.hpp"

namespace outbox::admin {

CompanySlots::Slot::~Slot() {
    if (owner_ != nullptr) owner_->give_back(key_);
}

std::optional<CompanySlots::Slot> CompanySlots::try_take(const Key& key) {
    std::lock_guard lock(mutex_);
    int& held = held_[key];
    if (held >= per_company_) return std::nullopt;
    ++held;
    return std::optional<Slot>(std::in_place, *this, key);
}

void CompanySlots::give_back(const Key& key) noexcept {
    std::lock_guard lock(mutex_);
    const auto it = held_.find(key);
    if (it != held_.end() && --it->second <= 0) held_.erase(it);
}

}  // namespace outbox::admin
