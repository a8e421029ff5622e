#pragma once
// The rate limiter's grants, recorded by the database: tests check the fleet-wide rate on the
// grants (exact) and the calls' starts or arrivals against them (with a scheduling tolerance).

#include <algorithm>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace outbox::test {

/// The largest number of `times` (seconds, sorted) inside any half-open window [t, t + width).
inline std::size_t worst_window(const std::vector<double>& times, double width) {
    std::size_t worst = 0;
    for (std::size_t i = 0; i < times.size(); ++i) {
        const auto from = times.begin() + static_cast<std::ptrdiff_t>(i);
        worst = std::max(worst, static_cast<std::size_t>(std::lower_bound(from, times.end(), times[i] + width) - from));
    }
    return worst;
}

/// Records every start the rate limiter grants, by the database's clock: the limiter's own
/// function is wrapped, and the grant is the reserved start (next_start_at before the push).
inline void record_rate_grants(const std::string& url) {
    pqxx::connection conn(url);
    pqxx::work tx(conn);
    tx.exec(R"SQL(
CREATE TABLE test_rate_grant (handler_name text NOT NULL, granted_at timestamptz NOT NULL);
GRANT INSERT ON test_rate_grant TO PUBLIC;
ALTER FUNCTION outbox_reserve_call_slot(text, interval, interval) RENAME TO outbox_reserve_call_slot_granting;
CREATE FUNCTION outbox_reserve_call_slot(p_handler text, p_interval interval, p_max_wait interval)
RETURNS interval LANGUAGE plpgsql AS $$
DECLARE
    v_wait interval := outbox_reserve_call_slot_granting(p_handler, p_interval, p_max_wait);
BEGIN
    IF v_wait IS NOT NULL THEN
        INSERT INTO test_rate_grant
            SELECT p_handler, next_start_at - p_interval FROM outbox_handler_throttle WHERE handler_name = p_handler;
    END IF;
    RETURN v_wait;
END
$$;
)SQL");
    tx.commit();
}

/// The recorded grants, in seconds since the epoch, sorted.
inline std::vector<double> rate_grants(const std::string& url) {
    pqxx::connection conn(url);
    pqxx::read_transaction tx(conn);
    std::vector<double> times;
    for (const auto& row : tx.exec("SELECT extract(epoch FROM granted_at)::float8 FROM test_rate_grant ORDER BY granted_at")) {
        times.push_back(row[0].as<double>());
    }
    return times;
}

}  // namespace outbox::test
