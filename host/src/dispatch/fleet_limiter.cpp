#include "dispatch/fleet_limiter.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include <pqxx/notification>
#include <pqxx/pqxx>

#include "db/connection_pool.hpp"
#include "db/db_error.hpp"
#include "db/db_session.hpp"
#include "db/pg_array.hpp"
#include "dispatch/wakeup_listener.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {

constexpr const char* kSlotFreeChannel = "outbox_handler_slot_free";

// One free or expired slot, or no row (migration V6).
constexpr const char* kTakeSlotSql =
    "SELECT taken_slot, taken_token::text FROM outbox_take_handler_slot($1, $2, $3, $4::bigint * interval '1 millisecond')";

// Renewals are fenced on the token and on the expiry: a slot that expired may have been
// taken meanwhile, by another host (a new token) or by a 0.1.0 host (an advisory lock that
// leaves the row as it is), so it is never revived; it does not come back in RETURNING and
// its call is reported SLOT_LOST (correctness review F9).
constexpr const char* kRenewSlotsSql = R"SQL(
UPDATE outbox_handler_slot s
SET expires_at = clock_timestamp() + $4::bigint * interval '1 millisecond'
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::uuid[])) AS h(handler_name, slot, token)
WHERE s.handler_name = h.handler_name AND s.slot = h.slot AND s.token = h.token AND s.expires_at > clock_timestamp()
RETURNING s.token::text
)SQL";

// Fenced like renewals; waiters on every host hear of the freed slot at commit.
constexpr const char* kReleaseSlotsSql = R"SQL(
WITH freed AS (
    UPDATE outbox_handler_slot s
    SET holder = NULL, token = NULL, expires_at = NULL
    FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::uuid[])) AS r(handler_name, slot, token)
    WHERE s.handler_name = r.handler_name AND s.slot = r.slot AND s.token = r.token
    RETURNING s.handler_name
)
SELECT pg_notify('outbox_handler_slot_free', handler_name) FROM (SELECT DISTINCT handler_name FROM freed) f
)SQL";

constexpr const char* kReserveStartSql =
    "SELECT (extract(epoch FROM outbox_reserve_call_slot($1, $2::bigint * interval '1 microsecond', "
    "$3::bigint * interval '1 microsecond')) * 1000000)::bigint";

// Idle connections kept for takes, releases and reservations; more are opened while many
// workers need one at the same moment, and closed after.
constexpr std::size_t kMaxIdleConnections = 4;

// How often the LISTEN connection is checked for an answer.
constexpr auto kListenCheck = std::chrono::seconds{10};

// How often a wait looks at give_up(), which has no notification of its own.
constexpr auto kGiveUpCheck = std::chrono::milliseconds{20};

bool wait_or_give_up(std::chrono::microseconds delay, const std::function<bool()>& give_up) {
    const auto until = std::chrono::steady_clock::now() + delay;
    while (std::chrono::steady_clock::now() < until) {
        if (give_up()) return false;
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - std::chrono::steady_clock::now());
        std::this_thread::sleep_for(std::min<std::chrono::microseconds>(left, std::chrono::milliseconds{10}));
    }
    return !give_up();
}

std::unique_ptr<pqxx::connection> open_limiter_connection(const std::string& url) {
    // Named at connect time, not by a session SET a transaction-mode pooler would leave on
    // its server connection (a name in the URL itself still wins).
    auto conn = db::open_connection(db::conninfo_with(url, {{"application_name", "outboxd fleet limiter"}}));
    const db::ConnectionSettings settings = db::connection_settings();
    if (!settings.transaction_pooled) {
        // The server bounds every limiter statement, and a backend whose client is gone (this
        // host's call guard shut the socket down) stops waiting within a second instead of
        // staying queued on a lock (PostgreSQL 14+). Behind a transaction-mode pooler the
        // functions' own lock_timeout (V17) is the bound.
        std::string sql = db::statement_timeout_sql(settings, "SET");
        if (conn->server_version() >= 140000) sql += "; SET client_connection_check_interval = 1000";
        db::CallGuard guard(*conn);
        pqxx::nontransaction(*conn).exec(sql);
    }
    return conn;
}

// A slot function gave up on the handler's lock after V17's lock_timeout: a session holds it
// and does not finish (a frozen host of 0.1.0, which holds it across a transaction).
bool lock_wait_timed_out(const db::DbFailure& failure) {
    return failure.kind == db::DbFailureKind::Sql && failure.sqlstate == "55P03";
}

struct SlotBatch {
    std::vector<std::uint64_t> ids;
    std::vector<std::string> handlers, slots, tokens;
    void add(std::uint64_t id, const std::string& handler, int slot, const std::string& token) {
        ids.push_back(id);
        handlers.push_back(handler);
        slots.push_back(std::to_string(slot));
        tokens.push_back(token);
    }
    [[nodiscard]] bool empty() const noexcept { return ids.empty(); }
};

pqxx::result run_batch(pqxx::connection& conn, const char* sql, const SlotBatch& batch) {
    pqxx::nontransaction tx(conn);
    return tx.exec_params(sql, db::pg_array(batch.handlers), db::pg_array(batch.slots), db::pg_array(batch.tokens));
}

}  // namespace

class FleetLimiter::Receiver final : public pqxx::notification_receiver {
public:
    Receiver(pqxx::connection_base& conn, FleetLimiter& owner)
        : pqxx::notification_receiver(conn, kSlotFreeChannel), owner_(owner) {}
    void operator()(const std::string& payload, int /*backend_pid*/) override { owner_.note_released(payload); }

private:
    FleetLimiter& owner_;
};

std::chrono::microseconds FleetLimiter::start_interval(double rate) noexcept {
    const double base = 1e6 / rate;
    // The margin absorbs the jitter between a reserved start and the request's arrival.
    const double margin = std::min(std::max(base * 0.05, 25'000.0), base * 0.5);
    return std::chrono::microseconds{static_cast<long long>(std::ceil(base + margin))};
}

FleetLimiter::Permit::~Permit() {
    if (owner_ != nullptr) owner_->release(id_);
}

FleetLimiter::FleetLimiter(std::string url, db::OutageLog& outage, Options options)
    : url_(std::move(url)), outage_(outage), options_(std::move(options)) {}

FleetLimiter::~FleetLimiter() {
    if (renewer_.joinable()) {
        renewer_.request_stop();
        renewer_.join();
    }
    try {
        SlotBatch batch;
        for (const auto& [id, held] : held_) batch.add(id, held.handler, held.slot, held.token);
        if (!batch.empty()) {
            with_connection([&](pqxx::connection& conn) { return run_batch(conn, kReleaseSlotsSql, batch).size(); });
        }
    } catch (...) {
        // They expire.
    }
}

template <class Work>
auto FleetLimiter::with_connection(Work&& work) -> std::optional<decltype(work(std::declval<pqxx::connection&>()))> {
    Conn conn;
    {
        std::lock_guard lock(mutex_);
        if (!idle_.empty()) {
            conn = std::move(idle_.back());
            idle_.pop_back();
        }
    }
    // A connection left idle across a server restart breaks on first use: one retry on a
    // new connection, and only its failure counts.
    for (int attempt = 0; attempt < 2; ++attempt) {
        const bool reused = conn.conn && conn.conn->is_open();
        try {
            if (!reused) conn = Conn{open_limiter_connection(url_), std::chrono::steady_clock::now()};
            auto result = [&] {
                db::CallGuard guard(*conn.conn);
                return work(*conn.conn);
            }();
            outage_.succeeded(conn.opened);
            std::lock_guard lock(mutex_);
            if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
            return result;
        } catch (...) {
            const db::DbFailure failure = db::classify_db_error(std::current_exception());
            if (lock_wait_timed_out(failure)) {
                // Not an outage: the connection is fine and the caller waits, then asks again.
                warn_lock_held();
                std::lock_guard lock(mutex_);
                if (idle_.size() < kMaxIdleConnections) idle_.push_back(std::move(conn));
                return std::nullopt;
            }
            conn = Conn{};
            if (reused && failure.kind == db::DbFailureKind::ConnectionBroken) continue;
            outage_.failed("fleet limiter", failure);
            return std::nullopt;
        }
    }
    return std::nullopt;
}

void FleetLimiter::warn_lock_held() {
    const auto now = std::chrono::steady_clock::now();
    {
        std::lock_guard lock(mutex_);
        if (last_lock_warning_ && now - *last_lock_warning_ < std::chrono::seconds{30}) return;
        last_lock_warning_ = now;
    }
    log::warn("fleet limiter: a handler's slot lock is held by a database session that does not finish (a frozen "
              "host?); waiting for it (this line repeats at most every 30 s)");
}

void FleetLimiter::ensure_renewer() {
    std::lock_guard lock(mutex_);
    if (!renewer_.joinable()) renewer_ = std::jthread([this](std::stop_token stop) { renew_loop(stop); });
}

std::optional<FleetLimiter::Permit> FleetLimiter::acquire(const routing::HandlerEntry& entry,
                                                          const std::function<bool()>& give_up) {
    std::optional<Permit> permit = entry.settings.max_concurrency ? take_slot(entry, give_up) : std::optional<Permit>(std::in_place);
    if (!permit) return std::nullopt;
    // A permit given up here releases its slot on the way out.
    if (entry.settings.rate_limit_per_second && !reserve_start(entry, give_up)) return std::nullopt;
    return permit;
}

std::optional<FleetLimiter::Permit> FleetLimiter::take_slot(const routing::HandlerEntry& entry,
                                                            const std::function<bool()>& give_up) {
    ensure_renewer();
    const long long ttl_ms = options_.slot_ttl.count();
    while (true) {
        if (give_up()) return std::nullopt;
        std::uint64_t seen = 0;
        {
            std::lock_guard lock(mutex_);
            seen = releases_[entry.name];
        }
        if (!renewals_ok_) {
            // A slot taken now could not be kept: wait until renewals reach the database.
            if (!wait_for_release(entry.name, seen, options_.fallback_poll, give_up)) return std::nullopt;
            continue;
        }
        const auto taken = with_connection([&](pqxx::connection& conn) {
            pqxx::nontransaction tx(conn);
            const pqxx::result rows =
                tx.exec_params(kTakeSlotSql, entry.name, *entry.settings.max_concurrency, options_.holder, ttl_ms);
            return rows.empty() ? std::optional<Held>()
                                : std::optional<Held>(Held{entry.name, rows[0][0].as<int>(), rows[0][1].c_str(), false});
        });
        if (taken && *taken) {
            std::lock_guard lock(mutex_);
            const std::uint64_t id = next_id_++;
            held_.emplace(id, std::move(**taken));
            return Permit(this, id);
        }
        // All busy, or the database is out of reach (then no new slot may be taken at all).
        if (!wait_for_release(entry.name, seen, options_.fallback_poll, give_up)) return std::nullopt;
    }
}

bool FleetLimiter::reserve_start(const routing::HandlerEntry& entry, const std::function<bool()>& give_up) {
    const auto interval = start_interval(*entry.settings.rate_limit_per_second);
    const auto max_wait = std::max<std::chrono::microseconds>(std::chrono::seconds{1}, interval * 2);
    while (true) {
        if (give_up()) return false;
        const auto wait = with_connection([&](pqxx::connection& conn) {
            pqxx::nontransaction tx(conn);
            const pqxx::result row = tx.exec_params(kReserveStartSql, entry.name, static_cast<long long>(interval.count()),
                                                    static_cast<long long>(max_wait.count()));
            return row[0][0].is_null() ? std::optional<long long>() : std::optional<long long>(row[0][0].as<long long>());
        });
        if (wait && *wait) return wait_or_give_up(std::chrono::microseconds{**wait}, give_up);
        const auto retry_in = wait ? interval : std::chrono::duration_cast<std::chrono::microseconds>(options_.fallback_poll);
        if (!wait_or_give_up(retry_in, give_up)) return false;
    }
}

bool FleetLimiter::wait_for_release(const std::string& handler, std::uint64_t seen, std::chrono::microseconds timeout,
                                    const std::function<bool()>& give_up) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (give_up()) return false;
        std::unique_lock lock(mutex_);
        if (releases_[handler] != seen) return true;
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) return true;
        released_cv_.wait_for(lock, std::min<std::chrono::steady_clock::duration>(until - now, kGiveUpCheck));
    }
}

void FleetLimiter::note_released(const std::string& handler) {
    {
        std::lock_guard lock(mutex_);
        ++releases_[handler];
    }
    released_cv_.notify_all();
}

void FleetLimiter::release(std::uint64_t id) noexcept {
    try {
        SlotBatch batch;
        {
            std::lock_guard lock(mutex_);
            const auto it = held_.find(id);
            if (it == held_.end()) return;  // found lost by the renewer
            it->second.releasing = true;
            batch.add(id, it->second.handler, it->second.slot, it->second.token);
        }
        const auto freed = with_connection([&](pqxx::connection& conn) { return run_batch(conn, kReleaseSlotsSql, batch).size(); });
        if (!freed) return;  // the renewer gives it back once the database answers again
        {
            std::lock_guard lock(mutex_);
            held_.erase(id);
        }
        note_released(batch.handlers.front());
    } catch (...) {
        // Out of memory: the slot stays held and expires.
    }
}

// What the renewer's loop carries from one pass to the next: the LISTEN for freed slots
// and when to renew, listen again or check the LISTEN connection.
struct FleetLimiter::RenewLoop {
    explicit RenewLoop(std::optional<std::string> listen_url) : listen(std::move(listen_url)) {}

    const std::optional<std::string> listen;
    // Declared in this order so the receiver (its UNLISTEN) goes before its connection.
    std::unique_ptr<pqxx::connection> listening;
    std::optional<Receiver> receiver;
    db::ReconnectBackoff listen_backoff;
    std::chrono::steady_clock::time_point listening_since{};
    std::chrono::steady_clock::time_point next_listen = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point next_renewal = std::chrono::steady_clock::now();
    std::chrono::steady_clock::time_point next_listen_check = std::chrono::steady_clock::now() + kListenCheck;
    bool renewals_failed = false;

    void stop_listening() {
        if (listening) {
            try {
                const db::CallGuard guard(*listening, std::chrono::steady_clock::now() + std::chrono::seconds{1});
                receiver.reset();
            } catch (...) {
                // A broken connection has nothing left to unlisten.
            }
        }
        receiver.reset();
        listening.reset();
    }

    void listen_again_later() {
        stop_listening();
        next_listen = std::chrono::steady_clock::now() + listen_backoff.next();
    }
};

// Renewals and releases go over the path slots are taken on (database.url); session_url
// carries only the LISTEN for releases. A path that takes slots but cannot renew them would
// let every slot expire under its running call and be taken again, so the fleet could run
// many times max_concurrency calls (correctness review F3). While renewals fail, this host
// takes no new slot (take_slot), and LISTEN failing only costs the fallback poll.
void FleetLimiter::renew_loop(std::stop_token stop) {
    RenewLoop loop(listen_url(url_, options_.session_url));
    while (!stop.stop_requested()) {
        const auto now = std::chrono::steady_clock::now();
        if (loop.listen && !loop.listening && now >= loop.next_listen) start_listening(loop);
        if (now >= loop.next_renewal) renew(loop);
        if (loop.listening && now >= loop.next_listen_check) check_listening(loop);
        await_releases(loop, stop);
    }
    loop.stop_listening();
}

void FleetLimiter::start_listening(RenewLoop& loop) {
    try {
        loop.listening_since = std::chrono::steady_clock::now();
        loop.listening = open_limiter_connection(*loop.listen);
        // Bounds LISTEN: a silent server holds nothing.
        {
            const db::CallGuard guard(*loop.listening);
            loop.receiver.emplace(*loop.listening, *this);
            loop.listening->get_notifs();  // sends LISTEN
        }
        // libpqxx swallows a failed LISTEN: a connection the guard closed is not a recovery.
        if (!loop.listening->is_open()) throw pqxx::broken_connection("LISTEN got no answer");
        outage_.succeeded(loop.listening_since);
        loop.listen_backoff.reset();
        renotify_waiters();
    } catch (...) {
        outage_.failed("fleet limiter", db::classify_db_error(std::current_exception()));
        loop.listen_again_later();
    }
}

void FleetLimiter::renew(RenewLoop& loop) {
    bool renewed = false;
    if (loop.listening && *loop.listen == url_) {
        // Without a session_url both paths are database.url: the LISTEN connection renews,
        // as it always did, and the host keeps one connection fewer.
        try {
            const db::CallGuard guard(*loop.listening);
            renewed = renew_slots(*loop.listening);
            outage_.succeeded(loop.listening_since);
        } catch (...) {
            outage_.failed("fleet limiter", db::classify_db_error(std::current_exception()));
            loop.listen_again_later();
        }
    } else {
        renewed = with_connection([this](pqxx::connection& conn) { return renew_slots(conn); }).has_value();
    }
    renewals_ok_ = renewed;
    // Releases announced while the path was down were missed: waiters look again.
    if (renewed && loop.renewals_failed) renotify_waiters();
    loop.renewals_failed = !renewed;
    // A failed renewal is retried sooner: a short blip must not cost the slots.
    loop.next_renewal = std::chrono::steady_clock::now() + (renewed ? options_.renew_interval : options_.renew_interval / 4);
}

bool FleetLimiter::renew_slots(pqxx::connection& conn) {
    SlotBatch releasing, renewing;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [id, held] : held_) (held.releasing ? releasing : renewing).add(id, held.handler, held.slot, held.token);
    }
    if (!releasing.empty()) {
        run_batch(conn, kReleaseSlotsSql, releasing);
        std::lock_guard lock(mutex_);
        for (const auto id : releasing.ids) held_.erase(id);
    }
    if (renewing.empty()) return true;
    pqxx::nontransaction tx(conn);
    const pqxx::result rows = tx.exec_params(kRenewSlotsSql, db::pg_array(renewing.handlers), db::pg_array(renewing.slots),
                                             db::pg_array(renewing.tokens), static_cast<long long>(options_.slot_ttl.count()));
    std::set<std::string> kept;
    for (const auto& row : rows) kept.insert(row[0].c_str());
    std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < renewing.ids.size(); ++i) {
        if (kept.count(renewing.tokens[i]) != 0) continue;
        const auto it = held_.find(renewing.ids[i]);
        if (it == held_.end() || it->second.releasing) continue;  // its call ended meanwhile
        // Out of reach for longer than the slot's expiry: another host may have taken it,
        // and the fleet may run one call too many until this one ends.
        log::warn("fleet concurrency slot expired while its call was running", {.handler = it->second.handler, .code = "SLOT_LOST"});
        held_.erase(it);
    }
    return true;
}

void FleetLimiter::check_listening(RenewLoop& loop) {
    // A LISTEN whose path went silent would never hear another release: one guarded
    // round trip now and then finds out.
    try {
        const db::CallGuard guard(*loop.listening);
        pqxx::nontransaction(*loop.listening).exec("SELECT 1");
    } catch (...) {
        loop.listen_again_later();
    }
    loop.next_listen_check = std::chrono::steady_clock::now() + kListenCheck;
}

void FleetLimiter::await_releases(RenewLoop& loop, const std::stop_token& stop) {
    if (loop.listening) {
        try {
            loop.listening->await_notification(0, 200'000);
        } catch (...) {
            loop.listen_again_later();
        }
    } else {
        db::sleep_for(std::chrono::milliseconds{200}, stop);
    }
}

void FleetLimiter::renotify_waiters() {
    std::vector<std::string> handlers;
    {
        std::lock_guard lock(mutex_);
        for (const auto& [handler, count] : releases_) handlers.push_back(handler);
    }
    for (const auto& handler : handlers) note_released(handler);
}

}  // namespace outbox::dispatch
