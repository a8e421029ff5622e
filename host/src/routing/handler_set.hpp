#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "outbox/sdk/handler.hpp"

namespace outbox::routing {

/// A handler's settings as the host applies them: the file's section (config::HandlerSettings)
/// with its defaults filled in, so the timeout is always set.
struct HandlerSettings {
    std::optional<int> max_concurrency;           // fleet-wide calls in flight
    std::optional<double> rate_limit_per_second;  // fleet-wide call starts per second
    std::chrono::milliseconds timeout{};          // the deadline of one call (ctx.deadline())
    std::string config_json = "{}";               // the `config:` section as JSON
    std::optional<config::CircuitBreakerSettings> circuit_breaker;  // unset: no breaker
    config::HandlerSettings::CommitGroup commit_group{};  // max_events 0: each event commits alone

    /// Whether any fleet-wide limit applies.
    [[nodiscard]] bool limited() const noexcept { return max_concurrency.has_value() || rate_limit_per_second.has_value(); }
};

/// `written` with an unset timeout taken from outbox.handler_timeout's default (Config::handler()
/// has usually filled it from the configuration already).
HandlerSettings resolve(const config::HandlerSettings& written);

/// One loaded handler with the host's settings for it.
struct HandlerEntry {
    std::string name;
    std::vector<std::string> event_types;
    std::shared_ptr<sdk::Handler> handler;  // keeps its plugin library loaded
    HandlerSettings settings;
    std::filesystem::path file;
    std::string abi{};     // as the plugin's manifest states it, for the fleet registry
    std::string sha256{};  // of the plugin file as loaded, for the fleet registry
};

/// An immutable snapshot of the handlers a host routes to. Replaced as a whole (never
/// mutated) so a worker that took a snapshot keeps its handlers alive until it is done.
class HandlerSet {
public:
    HandlerSet() = default;
    explicit HandlerSet(std::vector<HandlerEntry> entries);

    /// Handlers that support `event_type`, in load order.
    [[nodiscard]] std::vector<const HandlerEntry*> for_type(const std::string& event_type) const;
    /// Every event type some handler supports, sorted: what this host may claim.
    [[nodiscard]] const std::vector<std::string>& event_types() const noexcept { return event_types_; }
    /// Types none of whose handlers has a fleet-wide limit: claimed together, by free capacity.
    [[nodiscard]] const std::vector<std::string>& unthrottled_types() const noexcept { return unthrottled_; }
    /// Types with a limited handler -> how many of its events one host keeps in flight.
    /// Claiming more would only park workers waiting for the fleet-wide limit while other
    /// event types starve.
    [[nodiscard]] const std::map<std::string, int>& throttled_types() const noexcept { return throttled_; }
    [[nodiscard]] const std::vector<HandlerEntry>& entries() const noexcept { return entries_; }

private:
    std::vector<HandlerEntry> entries_;
    std::map<std::string, std::vector<std::size_t>> by_type_;
    std::vector<std::string> event_types_;
    std::vector<std::string> unthrottled_;
    std::map<std::string, int> throttled_;
};

/// The handler set a host routes to now. Replaced as a whole when plugins are added,
/// replaced or removed; readers take a snapshot and keep it for as long as they need it.
/// Thread-safe.
class CurrentHandlers {
public:
    explicit CurrentHandlers(std::shared_ptr<const HandlerSet> initial) : current_(std::move(initial)) {}
    [[nodiscard]] std::shared_ptr<const HandlerSet> get() const {
        std::lock_guard lock(mutex_);
        return current_;
    }
    /// The replaced set is released after the lock (it may unload a plugin library).
    void set(std::shared_ptr<const HandlerSet> next) {
        std::lock_guard lock(mutex_);
        current_.swap(next);
    }

private:
    // A mutex, not std::atomic<std::shared_ptr>: GCC 12's version guards the pointer with a
    // lock bit that ThreadSanitizer cannot see, so every swap is reported as a race.
    mutable std::mutex mutex_;
    std::shared_ptr<const HandlerSet> current_;
};

}  // namespace outbox::routing
