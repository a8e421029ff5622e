#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <pqxx/connection>

#include "db/outage_log.hpp"
#include "dispatch/handler_set.hpp"

namespace outbox::dispatch {

/// Enforces handlers.<name>.max_concurrency and rate_limit_per_second for the whole fleet,
/// coordinated through PostgreSQL (migration V2):
/// - concurrency: slot i is the session advisory lock (hash(name), i), held on this host's
///   one limiter connection; a host that dies frees its slots with its connection;
/// - rate: every call reserves the next start time in outbox_handler_throttle, spaced
///   1/rate apart plus a small margin, so no 1-second window sees more than `rate` starts
///   even with scheduling jitter, and calls are spread out rather than bursted.
/// Thread-safe: workers call acquire() concurrently; the connection is used under a mutex
/// and waits happen outside it.
class FleetLimiter {
public:
    /// Holds a concurrency slot (if the handler has a limit) until destroyed.
    class Permit {
    public:
        Permit() = default;
        Permit(FleetLimiter* owner, int key, int slot, std::uint64_t generation) noexcept
            : owner_(owner), key_(key), slot_(slot), generation_(generation) {}
        Permit(Permit&& other) noexcept
            : owner_(std::exchange(other.owner_, nullptr)), key_(other.key_), slot_(other.slot_),
              generation_(other.generation_) {}
        Permit& operator=(Permit&&) = delete;
        Permit(const Permit&) = delete;
        Permit& operator=(const Permit&) = delete;
        ~Permit();

    private:
        FleetLimiter* owner_ = nullptr;
        int key_ = 0;
        int slot_ = -1;
        std::uint64_t generation_ = 0;
    };

    FleetLimiter(std::string url, db::OutageLog& outage) : url_(std::move(url)), outage_(outage) {}

    /// Whether `settings` asks for any fleet-wide limit.
    static bool limited(const config::HandlerSettings& settings) noexcept {
        return settings.max_concurrency.has_value() || settings.rate_limit_per_second.has_value();
    }
    /// The spacing between call starts for `rate` calls per second.
    static std::chrono::microseconds start_interval(double rate) noexcept;

    /// Blocks until `entry` may start a call, or returns nullopt as soon as `give_up()`
    /// turns true (lease lost, host stopping).
    std::optional<Permit> acquire(const HandlerEntry& entry, const std::function<bool()>& give_up);

private:
    friend class Permit;
    template <class Work>
    std::optional<typename std::invoke_result_t<Work, pqxx::connection&>> with_connection(Work&& work);
    void release(int key, int slot, std::uint64_t generation) noexcept;

    std::string url_;
    db::OutageLog& outage_;
    std::mutex mutex_;
    std::unique_ptr<pqxx::connection> conn_;
    std::uint64_t generation_ = 0;          // bumped when the connection (and its slots) is lost
    std::map<int, std::set<int>> held_;     // key -> slots held on conn_
};

}  // namespace outbox::dispatch
