#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <pqxx/connection>

#include "db/outage_log.hpp"
#include "routing/handler_set.hpp"

namespace outbox::dispatch {

// The limiter takes routing entries; callers written before routing/ existed name them here.
using routing::HandlerEntry;

/// Enforces handlers.<name>.max_concurrency and rate_limit_per_second for the whole fleet,
/// through PostgreSQL (slots and renewals, rate reservations: docs/design.md, "Fleet-wide
/// limits"). Thread-safe: workers call acquire() concurrently; no lock is held across a round trip.
class FleetLimiter {
public:
    struct Options {
        std::string holder = "outboxd";  // this host's id, stored with the slots it holds
        std::chrono::milliseconds renew_interval{2000};
        /// How long a slot outlives its last renewal: a connection blip shorter than
        /// slot_ttl - renew_interval keeps every slot; a dead host's slots free after it.
        std::chrono::milliseconds slot_ttl{10000};
        std::chrono::milliseconds fallback_poll{1000};
        /// database.session_url: the renewer LISTENs for freed slots there when set (see
        /// listen_url()); without a LISTEN, waiters find freed slots every fallback_poll.
        std::string session_url = {};
    };

    /// Holds a concurrency slot (if the handler has a limit) until destroyed.
    class Permit {
    public:
        Permit() = default;
        Permit(FleetLimiter* owner, std::uint64_t id) noexcept : owner_(owner), id_(id) {}
        Permit(Permit&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)), id_(other.id_) {}
        Permit& operator=(Permit&&) = delete;
        Permit(const Permit&) = delete;
        Permit& operator=(const Permit&) = delete;
        ~Permit();

    private:
        FleetLimiter* owner_ = nullptr;
        std::uint64_t id_ = 0;
    };

    FleetLimiter(std::string url, db::OutageLog& outage) : FleetLimiter(std::move(url), outage, Options{}) {}
    FleetLimiter(std::string url, db::OutageLog& outage, Options options);
    /// Stops the renewer and gives back slots still held (best effort; they expire anyway).
    ~FleetLimiter();
    FleetLimiter(const FleetLimiter&) = delete;
    FleetLimiter& operator=(const FleetLimiter&) = delete;

    /// Whether `settings` asks for any fleet-wide limit.
    static bool limited(const routing::HandlerSettings& settings) noexcept { return settings.limited(); }
    /// The spacing between call starts for `rate` calls per second.
    static std::chrono::microseconds start_interval(double rate) noexcept;

    /// Blocks until `entry` may start a call, or returns nullopt as soon as `give_up()`
    /// turns true (lease lost, host stopping).
    std::optional<Permit> acquire(const routing::HandlerEntry& entry, const std::function<bool()>& give_up);

    /// The application_name of every connection the limiter opens.
    static constexpr const char* kApplicationName = "outboxd fleet limiter";

private:
    friend class Permit;
    class Receiver;
    struct Conn {
        std::unique_ptr<pqxx::connection> conn;
        std::chrono::steady_clock::time_point opened;
    };
    struct Held {
        std::string handler;
        int slot = 0;
        std::string token;
        bool releasing = false;  // the call ended; the release has not reached the database yet
    };

    template <class Work>
    auto with_connection(Work&& work) -> std::optional<decltype(work(std::declval<pqxx::connection&>()))>;
    std::optional<Permit> take_slot(const routing::HandlerEntry& entry, const std::function<bool()>& give_up);
    void warn_lock_held();
    bool reserve_start(const routing::HandlerEntry& entry, const std::function<bool()>& give_up);
    /// Waits until `handler`'s release count differs from `seen`, `timeout` passed or
    /// `give_up()` holds; returns false when given up.
    bool wait_for_release(const std::string& handler, std::uint64_t seen, std::chrono::microseconds timeout,
                          const std::function<bool()>& give_up);
    void note_released(const std::string& handler);
    void release(std::uint64_t id) noexcept;
    void renew_loop(std::stop_token stop);
    struct RenewLoop;
    void start_listening(RenewLoop& loop);
    /// Renews (and finishes releasing) the slots this host holds, then schedules the next renewal.
    void renew(RenewLoop& loop);
    /// One renewal round trip on `conn`; returns true (a failure throws).
    bool renew_slots(pqxx::connection& conn);
    void check_listening(RenewLoop& loop);
    /// Waits up to 200 ms for freed-slot notifications (or just sleeps without a LISTEN).
    void await_releases(RenewLoop& loop, const std::stop_token& stop);
    /// Makes every waiter look for a free slot again (releases may have been missed).
    void renotify_waiters();
    void ensure_renewer();

    std::string url_;
    db::OutageLog& outage_;
    Options options_;

    std::mutex mutex_;  // guards everything below; never held across a round trip
    std::condition_variable released_cv_;
    std::vector<Conn> idle_;                          // connections for takes, releases and reservations
    std::map<std::uint64_t, Held> held_;              // by permit id
    std::map<std::string, std::uint64_t> releases_;   // handler -> releases seen (NOTIFY or local)
    std::uint64_t next_id_ = 1;
    std::optional<std::chrono::steady_clock::time_point> last_lock_warning_;
    std::atomic<bool> renewals_ok_{true};  // the renewer's last renewal reached the database
    std::jthread renewer_;
};

}  // namespace outbox::dispatch
