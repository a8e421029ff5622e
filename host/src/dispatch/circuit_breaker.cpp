#include "dispatch/circuit_breaker.hpp"

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "core/duration.hpp"
#include "db/connect.hpp"
#include "log/log.hpp"

namespace outbox::dispatch {
namespace {

using Kind = core::HandlerOutcome::Kind;

// The breaker's pause is an operator's pause row with paused_by 'circuit-breaker'. An existing
// pause (an operator's, or another host's breaker) is left as it is.
constexpr const char* kOpenSql = R"SQL(
INSERT INTO outbox_handler_pause (handler_name, paused_by, probe_after)
VALUES ($1, 'circuit-breaker', now() + $2::bigint * interval '1 millisecond')
ON CONFLICT (handler_name) DO NOTHING
RETURNING 1
)SQL";

// Fenced by the row's own columns, so of two hosts updating at once the second re-reads the
// row the first wrote and takes nothing. Also answers, when nothing was taken, how long until
// the probe may be due (the cool-down's end, or the running probe's expiry).
constexpr const char* kTakeProbeSql = R"SQL(
WITH taken AS (
    UPDATE outbox_handler_pause
    SET probe_token = gen_random_uuid(), probe_owner = $2,
        probe_expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE handler_name = $1 AND paused_by = 'circuit-breaker'
      AND coalesce(probe_after, '-infinity') <= now() AND coalesce(probe_expires_at, '-infinity') <= now()
    RETURNING probe_token::text
)
SELECT (SELECT probe_token FROM taken),
       (SELECT ceil(extract(epoch FROM greatest(probe_after, probe_expires_at) - now()) * 1000)::bigint
        FROM outbox_handler_pause WHERE handler_name = $1 AND paused_by = 'circuit-breaker')
)SQL";

constexpr const char* kReleaseProbeSql = R"SQL(
UPDATE outbox_handler_pause SET probe_owner = NULL, probe_token = NULL, probe_expires_at = NULL
WHERE handler_name = $1 AND paused_by = 'circuit-breaker' AND probe_token = $2::uuid
)SQL";

constexpr const char* kReopenSql = R"SQL(
UPDATE outbox_handler_pause
SET probe_after = now() + $3::bigint * interval '1 millisecond',
    probe_owner = NULL, probe_token = NULL, probe_expires_at = NULL
WHERE handler_name = $1 AND paused_by = 'circuit-breaker' AND probe_token = $2::uuid
)SQL";

// Only the breaker's own pause, and only with this probe's token: an operator who took the
// pause over (or resumed and paused again) is never overruled.
constexpr const char* kCloseSql = R"SQL(
DELETE FROM outbox_handler_pause
WHERE handler_name = $1 AND paused_by = 'circuit-breaker' AND probe_token = $2::uuid
RETURNING 1
)SQL";

constexpr const char* kAuditSql = R"SQL(
INSERT INTO audit_event (actor, action, target_id, detail) VALUES ($1, $2, $3, $4::jsonb)
)SQL";

// A pause or resume wakes every host through the channel operators' pauses use.
void audit_and_notify(pqxx::work& tx, const char* action, const std::string& handler, const nlohmann::json& detail) {
    tx.exec_params0(kAuditSql, routing::kCircuitBreakerActor, action, handler, detail.dump());
    tx.exec_params("SELECT pg_notify($1, $2)", routing::kHandlerNotifyChannel, handler);
}

std::string probe_owner(const std::string& host_id) { return host_id.substr(0, 200); }

}  // namespace

template <class Work>
bool CircuitBreakers::with_connection(const char* what, const std::string& handler, Work&& work) {
    try {
        auto conn = pool_.acquire(std::chrono::steady_clock::now() + db::connection_settings().call_timeout);
        db::CallGuard guard(*conn);
        work(*conn);
        return true;
    } catch (...) {
        log::warn(what, {.handler = handler, .code = "CIRCUIT_BREAKER_DB"});
        return false;
    }
}

void CircuitBreakers::record(const routing::HandlerEntry& entry, core::HandlerOutcome::Kind kind) {
    const auto& settings = entry.settings.circuit_breaker;
    // A lost lease says nothing of the remote; a paused handler's calls (begun before the
    // pause) are not counted, so its window starts empty when it runs again.
    if (!settings || kind == Kind::LeaseLost || paused_.contains(entry.name)) return;
    std::optional<core::CircuitWindow::Tally> tripped;
    {
        std::lock_guard lock(mutex_);
        auto it = windows_.find(entry.name);
        if (it == windows_.end() || it->second.settings != *settings) {
            it = windows_.insert_or_assign(entry.name, Window{*settings, core::CircuitWindow(settings->window,
                                                                                              settings->min_calls,
                                                                                              settings->failure_ratio)})
                     .first;
        }
        tripped = it->second.calls.record(std::chrono::steady_clock::now(), kind == Kind::Retry);
    }
    if (tripped) open(entry, *tripped);
}

void CircuitBreakers::forget(const std::set<std::string>& paused) {
    std::lock_guard lock(mutex_);
    for (const auto& name : paused) windows_.erase(name);
}

void CircuitBreakers::open(const routing::HandlerEntry& entry, core::CircuitWindow::Tally tally) {
    const auto& settings = *entry.settings.circuit_breaker;
    const std::string window = core::format_duration(settings.window);
    const nlohmann::json detail{
        {"channel", routing::kCircuitBreakerActor},
        {"reason", std::to_string(tally.failures) + " of " + std::to_string(tally.calls) +
                       " calls failed with a retryable error within " + window + " on " + host_id_},
        {"failures", tally.failures},
        {"calls", tally.calls},
        {"window", window},
        {"failure_ratio", settings.failure_ratio},
        {"min_calls", settings.min_calls},
        {"cool_down", core::format_duration(settings.cool_down)},
        {"host", host_id_}};
    bool opened = false;
    with_connection("could not open the circuit breaker; it opens again at the next failures", entry.name,
                    [&](pqxx::connection& conn) {
                        pqxx::work tx(conn);
                        tx.exec("SET LOCAL lock_timeout = '5s'");
                        opened = !tx.exec_params(kOpenSql, entry.name, settings.cool_down.count()).empty();
                        if (opened) audit_and_notify(tx, "outbox.handler_paused", entry.name, detail);
                        tx.commit();
                    });
    if (!opened) return;
    metrics_.circuit_opened(entry.name);
    log::warn("circuit breaker opened: handler paused on every host (" + detail["reason"].get<std::string>() +
                  "); one probe call after " + core::format_duration(settings.cool_down),
              {.handler = entry.name});
    // This host stops at once, without waiting for its own NOTIFY or its next read.
    paused_.add_by_breaker(entry.name);
    paused_.mark_stale();
    wakeup_.notify();
}

CircuitBreakers::TakeResult CircuitBreakers::take_probe(pqxx::connection& conn, const std::string& handler,
                                                        std::chrono::milliseconds hold) {
    pqxx::nontransaction tx(conn);
    const pqxx::row row = tx.exec_params1(kTakeProbeSql, handler, probe_owner(host_id_), hold.count());
    TakeResult result;
    if (!row[0].is_null()) result.token = row[0].as<std::string>();
    if (!row[1].is_null()) result.due_in = std::chrono::milliseconds{row[1].as<long long>()};
    return result;
}

void CircuitBreakers::release_probe(pqxx::connection& conn, const std::string& handler, const std::string& token) {
    pqxx::nontransaction tx(conn);
    tx.exec_params0(kReleaseProbeSql, handler, token);
}

std::chrono::steady_clock::time_point CircuitBreakers::next_probe_try(const std::string& handler) const {
    std::lock_guard lock(mutex_);
    const auto it = next_probe_try_.find(handler);
    return it == next_probe_try_.end() ? std::chrono::steady_clock::time_point{} : it->second;
}

void CircuitBreakers::set_next_probe_try(const std::string& handler, std::chrono::steady_clock::time_point when) {
    std::lock_guard lock(mutex_);
    next_probe_try_[handler] = when;
}

void CircuitBreakers::probe_finished(Probe& probe, core::HandlerOutcome::Kind kind,
                                     std::chrono::milliseconds cool_down) {
    if (kind == Kind::LeaseLost) return probe_released(probe);
    if (probe.settled.exchange(true)) return;
    // Only a retryable failure, what the window counts, keeps the breaker open: any answer
    // the handler got (a success, or a failure no retry would fix) shows its remote is back.
    const bool failed = kind == Kind::Retry;
    metrics_.circuit_probe(probe.handler, failed ? "failure" : "success");
    bool applied = false;
    with_connection("could not store the circuit breaker's probe result; the probe expires and runs again",
                    probe.handler, [&](pqxx::connection& conn) {
                        pqxx::work tx(conn);
                        tx.exec("SET LOCAL lock_timeout = '5s'");
                        if (failed) {
                            applied = tx.exec_params(kReopenSql, probe.handler, probe.token, cool_down.count())
                                          .affected_rows() == 1;
                        } else {
                            applied = !tx.exec_params(kCloseSql, probe.handler, probe.token).empty();
                            if (applied) {
                                audit_and_notify(tx, "outbox.handler_resumed", probe.handler,
                                                 {{"channel", routing::kCircuitBreakerActor},
                                                  {"reason", "a probe call succeeded on " + host_id_},
                                                  {"host", host_id_}});
                            }
                        }
                        tx.commit();
                    });
    if (failed) {
        set_next_probe_try(probe.handler, std::chrono::steady_clock::now() + cool_down);
        if (applied) {
            log::warn("circuit breaker probe failed: the handler stays paused for another " +
                          core::format_duration(cool_down),
                      {.handler = probe.handler});
        }
        return;
    }
    if (!applied) return;
    log::info("circuit breaker closed: a probe call succeeded; handler resumed on every host", {.handler = probe.handler});
    paused_.mark_stale();
    wakeup_.notify();
}

void CircuitBreakers::probe_released(Probe& probe) {
    if (probe.settled.exchange(true)) return;
    with_connection("could not give back the circuit breaker's probe; it expires", probe.handler,
                    [&](pqxx::connection& conn) {
                        pqxx::nontransaction tx(conn);
                        tx.exec_params0(kReleaseProbeSql, probe.handler, probe.token);
                    });
}

}  // namespace outbox::dispatch
