#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace outbox::admin {

/// Caps the admin database calls one company (or the platform) runs at once, so that one
/// tenant cannot hold every admin connection (admin.db_connections_per_company). A call
/// over the cap is refused at once rather than queued: waiting would hold a request worker,
/// and a tenant sending many requests would then starve the others of workers instead.
/// Thread-safe.
class CompanySlots {
public:
    /// Who shares a cap: a company's ADMIN, HR and VIEWER users together; platform roles
    /// together, whatever company their token names.
    struct Key {
        bool platform = false;
        std::string company_id;
        auto operator<=>(const Key&) const = default;
    };

    /// A taken slot; given back on destruction.
    class Slot {
    public:
        Slot(CompanySlots& owner, Key key) noexcept : owner_(&owner), key_(std::move(key)) {}
        ~Slot();
        Slot(Slot&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)), key_(std::move(other.key_)) {}
        Slot& operator=(Slot&&) = delete;
        Slot(const Slot&) = delete;
        Slot& operator=(const Slot&) = delete;

    private:
        CompanySlots* owner_;
        Key key_;
    };

    explicit CompanySlots(int per_company) : per_company_(per_company) {}

    /// A slot for `key`, or nullopt when `key` already holds per_company of them.
    std::optional<Slot> try_take(const Key& key);

    [[nodiscard]] int per_company() const noexcept { return per_company_; }

private:
    void give_back(const Key& key) noexcept;

    const int per_company_;
    std::mutex mutex_;
    std::map<Key, int> held_;  // only keys holding a slot: the map never grows past the calls running
};

}  // namespace outbox::admin
