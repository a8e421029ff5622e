#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <pqxx/connection>

namespace outbox::routing {

/// The NOTIFY channel pause and resume signal on commit; every host then re-reads
/// outbox_handler_pause (the payload, the handler name, is informational).
inline constexpr const char* kHandlerNotifyChannel = "outboxd_handlers";

struct PausedHandler {
    std::string handler;
    std::string paused_at;  // RFC 3339, UTC
    std::string paused_by;
};

std::vector<PausedHandler> read_paused_handlers(pqxx::connection& conn);

/// The handlers paused fleet-wide as this host last read them. The scheduler re-reads them
/// when the listener marks the snapshot stale (NOTIFY, reconnect) and at every poll
/// interval; until the first read it claims nothing. Thread-safe.
class PausedHandlers {
public:
    void set(std::set<std::string> names);
    [[nodiscard]] bool contains(const std::string& name) const;
    [[nodiscard]] std::set<std::string> get() const;
    [[nodiscard]] bool loaded() const noexcept { return loaded_; }

    void mark_stale() noexcept { stale_ = true; }
    /// Clears the flag and returns whether it was set.
    bool take_stale() noexcept { return stale_.exchange(false); }

private:
    mutable std::mutex mutex_;
    std::set<std::string> names_;
    std::atomic<bool> loaded_{false};
    std::atomic<bool> stale_{true};
};

}  // namespace outbox::routing
