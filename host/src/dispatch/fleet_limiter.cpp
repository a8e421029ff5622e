#include "dispatch/fleet_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include <pqxx/pqxx>

#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "db/pg_array.hpp"

namespace outbox::dispatch {
namespace {
constexpr auto kRetryDelay = std::chrono::milliseconds{20};

bool wait_or_give_up(std::chrono::microseconds delay, const std::function<bool()>& give_up) {
    const auto until = std::chrono::steady_clock::now() + delay;
    while (std::chrono::steady_clock::now() < until) {
        if (give_up()) return false;
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - std::chrono::steady_clock::now());
        std::this_thread::sleep_for(std::min<std::chrono::microseconds>(left, std::chrono::milliseconds{10}));
    }
    return !give_up();
}
}  // namespace

std::chrono::microseconds FleetLimiter::start_interval(double rate) noexcept {
    const double base = 1e6 / rate;
    // The margin absorbs the jitter between a reserved start and the request's arrival.
    const double margin = std::min(std::max(base * 0.05, 25'000.0), base * 0.5);
    return std::chrono::microseconds{static_cast<long long>(std::ceil(base + margin))};
}

FleetLimiter::Permit::~Permit() {
    if (owner_ != nullptr && slot_ >= 0) owner_->release(key_, slot_, generation_);
}

template <class Work>
std::optional<typename std::invoke_result_t<Work, pqxx::connection&>> FleetLimiter::with_connection(Work&& work) {
    std::lock_guard lock(mutex_);
    try {
        if (!conn_ || !conn_->is_open()) {
            conn_ = db::open_connection(url_);
            ++generation_;
            held_.clear();
        }
        auto result = work(*conn_);
        outage_.succeeded();
        return result;
    } catch (...) {
        const db::DbFailure failure = db::classify_db_error(std::current_exception());
        outage_.failed("fleet limiter", failure);
        conn_.reset();  // its advisory locks are gone with it
        held_.clear();
        return std::nullopt;
    }
}

std::optional<FleetLimiter::Permit> FleetLimiter::acquire(const HandlerEntry& entry,
                                                          const std::function<bool()>& give_up) {
    const auto& settings = entry.settings;
    std::optional<Permit> permit;
    if (settings.max_concurrency) {
        while (true) {
            if (give_up()) return std::nullopt;
            const auto taken = with_connection([&](pqxx::connection& conn) {
                pqxx::work tx(conn);
                const int key = tx.exec_params("SELECT hashtext($1)", "outboxd:" + entry.name)[0][0].as<int>();
                std::vector<std::string> held;
                for (const int slot : held_[key]) held.push_back(std::to_string(slot));
                const int slot = tx.exec_params("SELECT outbox_try_acquire_call_slot($1, $2, $3::int[])", key,
                                                *settings.max_concurrency, db::pg_array(held))[0][0]
                                     .as<int>();
                tx.commit();
                if (slot >= 0) held_[key].insert(slot);
                return std::make_tuple(key, slot, generation_);
            });
            if (taken && std::get<1>(*taken) >= 0) {
                permit.emplace(this, std::get<0>(*taken), std::get<1>(*taken), std::get<2>(*taken));
                break;
            }
            if (!wait_or_give_up(kRetryDelay, give_up)) return std::nullopt;
        }
    }
    if (settings.rate_limit_per_second) {
        const auto interval = start_interval(*settings.rate_limit_per_second);
        const auto max_wait = std::max<std::chrono::microseconds>(std::chrono::seconds{1}, interval * 2);
        while (true) {
            if (give_up()) return std::nullopt;
            const auto wait = with_connection([&](pqxx::connection& conn) {
                pqxx::work tx(conn);
                const pqxx::result row = tx.exec_params(
                    "SELECT (extract(epoch FROM outbox_reserve_call_slot($1, $2::bigint * interval '1 microsecond', "
                    "$3::bigint * interval '1 microsecond')) * 1000000)::bigint",
                    entry.name, static_cast<long long>(interval.count()), static_cast<long long>(max_wait.count()));
                tx.commit();
                return row[0][0].is_null() ? std::optional<long long>() : std::optional<long long>(row[0][0].as<long long>());
            });
            if (wait && *wait) {
                if (!wait_or_give_up(std::chrono::microseconds{**wait}, give_up)) return std::nullopt;
                break;
            }
            if (!wait_or_give_up(wait ? interval : std::chrono::microseconds{kRetryDelay}, give_up)) return std::nullopt;
        }
    }
    if (!permit) permit.emplace();
    return permit;
}

void FleetLimiter::release(int key, int slot, std::uint64_t generation) noexcept {
    std::lock_guard lock(mutex_);
    try {
        if (generation != generation_ || !conn_ || !conn_->is_open()) return;  // the slot died with its connection
        held_[key].erase(slot);
        pqxx::nontransaction tx(*conn_);
        tx.exec_params("SELECT pg_advisory_unlock($1, $2)", key, slot);
    } catch (...) {
        // A broken connection released the lock server-side; the next use reconnects.
        conn_.reset();
        held_.clear();
    }
}

}  // namespace outbox::dispatch
