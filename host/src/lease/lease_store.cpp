#include "lease/lease_store.hpp"

#include <cstdint>
#include <cstdio>
#include <random>

#include <pqxx/pqxx>

#include "db/aggregate_order.hpp"
#include "db/pg_array.hpp"
#include "db/statement.hpp"

namespace outbox::lease {
namespace {

// Every statement reads the time from its last parameter, the server's now() when that is
// empty: tests move time by setting it (LeaseStore::set_time), production never does.
std::string with_time(std::string sql, int parameter) {
    const std::string at = "coalesce(nullif($" + std::to_string(parameter) + ", '')::timestamptz, now())";
    for (auto pos = sql.find("now()"); pos != std::string::npos; pos = sql.find("now()", pos + at.size())) {
        sql.replace(pos, 5, at);
    }
    return sql;
}

// Per-aggregate ordering: an event with a position in its aggregate is due only when no
// earlier event of that aggregate is unfinished (PENDING, PROCESSING, RETRY_WAIT) or waits
// for an operator (REVIEW_REQUIRED). Positions follow the publishers' commit order, so a
// snapshot that sees an event sees all its predecessors; a predecessor never leaves
// COMPLETED or DISCARDED, so a successor the snapshot lets through is safe to start. The
// lookup is one descent of event_publication_aggregate_idx (unfinished events only);
// events without a key skip it.
const std::string kAggregateHeadFilter =
    "\n      AND (aggregate_seq IS NULL OR NOT EXISTS (SELECT 1 FROM event_publication earlier WHERE " +
    db::holds_back("earlier", "event_publication") + "))\n";

// Claim: the due-row CTE walks a partial index in next_attempt_at order and skips rows
// another host has locked; attempt_count is counted here so a crash still counts. The
// update finds the locked rows by key (= ANY of their ids), never by a join the planner
// could turn into a walk of the whole primary key. Earlier
// consumptions are looked up only for events claimed before (version 2 after the claim
// means published and never touched since): on a large table that lookup is an index
// descent per event that first attempts never need.
std::string claim_sql(const char* due_filter) {
    std::string sql = R"SQL(
WITH due AS (
    SELECT event_id FROM event_publication
    WHERE )SQL";
    sql += due_filter;
    sql += kAggregateHeadFilter;
    sql += R"SQL(
      AND next_attempt_at <= now() AND event_type = ANY($1::text[])
    ORDER BY next_attempt_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE event_publication e
    SET status = 'PROCESSING', attempt_count = e.attempt_count + 1, lease_owner = $3,
        lease_incarnation = nullif($5, ''), lease_token = gen_random_uuid(), lease_expires_at = now() + $4::bigint * interval '1 millisecond',
        version = e.version + 1, updated_at = now()
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM due))
    RETURNING e.event_id, e.event_type, e.company_id, e.aggregate_key, e.payload, e.attempt_count,
              e.lease_token, e.occurred_at, e.version, e.traceparent, e.tracestate
)
SELECT c.event_id::text, c.event_type, c.company_id, coalesce(c.aggregate_key, ''), c.payload::text,
       c.attempt_count, c.lease_token::text, (extract(epoch FROM c.occurred_at) * 1000000)::bigint,
       CASE WHEN c.version <= 2 AND c.attempt_count <= 1 THEN NULL
            ELSE (SELECT string_agg(handler_name, ',') FROM event_consumption ec WHERE ec.event_id = c.event_id) END,
       coalesce(c.traceparent, ''), coalesce(c.tracestate, '')
FROM claimed c
)SQL";
    return sql;
}

// Ordinary claims skip suspects.
const std::string kClaimSql = with_time(
    claim_sql("status IN ('PENDING', 'RETRY_WAIT') AND (status = 'PENDING' OR last_error_code IS DISTINCT FROM 'WORKER_LOST')"), 6);

// Suspects (their previous host died mid-attempt) are claimed one at a time per host and
// run in a lane of their own, so a crash can be blamed on them (see kRescueSql).
const std::string kClaimSuspectSql = with_time(claim_sql("status = 'RETRY_WAIT' AND last_error_code = 'WORKER_LOST'"), 6);

// The batch statements name their events as `event_id = ANY($1)` besides joining the input
// on it: the planner then always reaches them through the primary key. Without it, a
// table whose statistics say it is small gets a sequential scan hashed against the input,
// once per batch (measured: 77 ms per outcome batch on 100,000 rows with four hosts).
//
// The batch statements fence on lease_token alone: a row has a token if and only if it is
// PROCESSING (CHECK event_publication_lease_check), and naming status = 'PROCESSING' here
// lets the planner walk the whole lease partial index once per batch instead of looking
// each event up by its key, which on a large, freshly analyzed table costs seconds.
//
// Finish: one statement for a whole batch of mixed outcomes. The consumption rows of
// handlers that did not use ctx.db() are inserted only for events whose fenced update applied.
// A completed event with a position releases the next unfinished event of its aggregate: its
// type is notified like a new event's, so a host that handles only that type starts it at
// once rather than at its next poll (review F10). `released` is read by the final SELECT only
// so that it runs (PostgreSQL skips an unreferenced read-only WITH query); one index descent
// per completed keyed event.
const std::string kFinishSql = with_time(R"SQL(
WITH input AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest($1::uuid[]), pg_catalog.unnest($2::uuid[]), pg_catalog.unnest($3::text[]),
                             pg_catalog.unnest($4::bigint[]), pg_catalog.unnest($5::text[]))
        AS t(event_id, lease_token, status, delay_ms, error_code)
), done AS (
    UPDATE event_publication e
    SET status = i.status,
        next_attempt_at = CASE WHEN i.status = 'RETRY_WAIT'
                               THEN now() + i.delay_ms * interval '1 millisecond' ELSE e.next_attempt_at END,
        last_error_code = coalesce(i.error_code, e.last_error_code),
        completed_at = CASE WHEN i.status = 'COMPLETED' THEN now() END,
        lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
        version = e.version + 1, updated_at = now()
    FROM input i
    WHERE e.event_id = ANY($1::uuid[]) AND e.event_id = i.event_id AND e.lease_token = i.lease_token
    RETURNING e.event_id, i.lease_token, i.status, e.company_id, e.aggregate_key, e.aggregate_seq
), released AS (
    SELECT pg_catalog.pg_notify('outboxd_events', n.event_type)
    FROM done d
    CROSS JOIN LATERAL (
        SELECT later.event_type FROM event_publication later
        WHERE later.company_id = d.company_id AND later.aggregate_key = d.aggregate_key
          AND later.aggregate_seq > d.aggregate_seq AND later.aggregate_seq IS NOT NULL
          AND later.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')
        ORDER BY later.aggregate_seq
        LIMIT 1
    ) n
    WHERE d.status = 'COMPLETED' AND d.aggregate_seq IS NOT NULL
), consumed AS (
    INSERT INTO event_consumption (event_id, handler_name)
    SELECT c.event_id, c.handler_name FROM ROWS FROM (pg_catalog.unnest($6::uuid[]), pg_catalog.unnest($7::text[])) AS c(event_id, handler_name)
    WHERE c.event_id IN (SELECT event_id FROM done)
    ON CONFLICT DO NOTHING
)
SELECT lease_token::text FROM done WHERE (SELECT count(*) FROM released) >= 0
)SQL", 8);

// Extend: rows another transaction holds locked right now (a handler's fence committing,
// perhaps waiting for a synchronous standby) are skipped rather than waited for, so one
// locked row cannot hold back every other lease of the host (review F10). A skipped row
// still carries this host's token in the statement's snapshot and is reported kept: the
// next beat extends it, or finds it gone. The rescuer skips locked rows too.
const std::string kExtendSql = with_time(R"SQL(
WITH held AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest($1::uuid[]), pg_catalog.unnest($2::uuid[])) AS h(event_id, lease_token)
), free AS (
    SELECT e.event_id FROM event_publication e JOIN held h ON h.event_id = e.event_id AND h.lease_token = e.lease_token
    WHERE e.event_id = ANY($1::uuid[])
    FOR UPDATE OF e SKIP LOCKED
), extended AS (
    UPDATE event_publication e
    SET lease_expires_at = now() + $3::bigint * interval '1 millisecond'
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM free))
)
SELECT e.lease_token::text FROM event_publication e JOIN held h ON h.event_id = e.event_id AND h.lease_token = e.lease_token
WHERE e.event_id = ANY($1::uuid[])
)SQL", 4);

// A released event is due again at once, its attempt given back.
const std::string kReleaseSet = R"SQL(
UPDATE event_publication e
SET status = CASE WHEN e.attempt_count <= 1 THEN 'PENDING' ELSE 'RETRY_WAIT' END,
    attempt_count = greatest(e.attempt_count - 1, 0),
    lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
    version = e.version + 1, updated_at = now()
)SQL";

const std::string kReleaseSql = with_time(kReleaseSet + R"SQL(
FROM ROWS FROM (pg_catalog.unnest($1::uuid[]), pg_catalog.unnest($2::uuid[])) AS r(event_id, lease_token)
WHERE e.event_id = ANY($1::uuid[]) AND e.event_id = r.event_id AND e.lease_token = r.lease_token
)SQL", 3);

// Leases of this process ($1 its host id, $4 its incarnation, claimed at or after $2, the
// server's clock when it started claiming) that it no longer tracks ($3: every token it does
// track). The incarnation keeps another live process with the same host_id out (review F5);
// a lease of a former process with the same host_id is left to the rescuer and its
// quarantine rules.
const std::string kReleaseUntrackedSql = with_time(kReleaseSet + R"SQL(
WHERE e.status = 'PROCESSING' AND e.lease_owner = $1 AND e.lease_incarnation = $4
  AND e.updated_at >= $2::timestamptz AND e.lease_token <> ALL ($3::uuid[])
)SQL", 5);

// Rescue: SKIP LOCKED so that hosts rescuing at the same moment split the work, and a row
// whose handler transaction is committing right now (FOR SHARE) is left for the next pass.
//
// Who pays for a lost worker: its attempt was counted at claim. If the lost host was running
// a suspect (an event already lost with a host before, code WORKER_LOST; hosts run those one
// at a time beside normal work), the crash is blamed on the suspect: it keeps its attempt,
// and every other event of that host gets its attempt back. Those still become suspects
// themselves, so a fresh poison event among them gets at most this one refund and then runs
// in the suspect lane, where it is charged. Without a suspect (the first crash of a poison
// event) every event in flight is charged, as nothing tells them apart. "Was running a
// suspect" looks at the host's leases still held or rescued in the same statement.
const std::string kRescueSql = with_time(R"SQL(
WITH expired AS (
    SELECT event_id, lease_owner FROM event_publication
    WHERE status = 'PROCESSING' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), blamed_owner AS (
    SELECT DISTINCT p.lease_owner FROM event_publication p
    WHERE p.status = 'PROCESSING' AND p.last_error_code = 'WORKER_LOST'
      AND p.lease_owner IN (SELECT lease_owner FROM expired)
), rescued AS (
    SELECT e.event_id,
           e.last_error_code IS DISTINCT FROM 'WORKER_LOST'
               AND e.lease_owner IN (SELECT lease_owner FROM blamed_owner) AS bystander
    FROM event_publication e
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM expired))
)
UPDATE event_publication e
SET status = CASE WHEN NOT r.bystander AND e.attempt_count >= $1 THEN 'REVIEW_REQUIRED' ELSE 'RETRY_WAIT' END,
    attempt_count = CASE WHEN r.bystander THEN greatest(e.attempt_count - 1, 0) ELSE e.attempt_count END,
    next_attempt_at = now(), last_error_code = 'WORKER_LOST',
    lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
    version = e.version + 1, updated_at = now()
FROM rescued r
WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM expired)) AND e.event_id = r.event_id
)SQL", 3);

// Parking (review F8): PENDING events that have been due for at least $2 ms and are still
// held back by an unfinished or reviewed earlier event of their aggregate get next_attempt_at
// 'infinity', beyond every claim's walk. The pass reads the front of the due index, the rows
// the claim reads first, $1 at a time. Each event is parked only while this statement holds
// a FOR SHARE lock on an earlier event that holds it back: that event's finishing update then
// waits for this commit, and its trigger (V22) sees the parked event and releases it. A
// locked earlier event is skipped, not waited for (the next earlier one, if any, serves).
// Events due for less than $2 are left alone: a successor whose head is about to finish is
// cheaper to walk past a few times than to park and release.
const std::string kParkSql = with_time(R"SQL(
WITH front AS (
    SELECT f.event_id, f.company_id, f.aggregate_key, f.aggregate_seq, f.next_attempt_at FROM event_publication f
    WHERE f.status IN ('PENDING', 'RETRY_WAIT') AND f.next_attempt_at <= now()
    ORDER BY f.next_attempt_at
    LIMIT $1
), blocked AS (
    SELECT f.event_id FROM front f
    CROSS JOIN LATERAL (
        SELECT 1 FROM event_publication earlier
        WHERE )SQL" + db::holds_back("earlier", "f") + R"SQL(
        ORDER BY earlier.aggregate_seq
        LIMIT 1
        FOR SHARE OF earlier SKIP LOCKED
    ) held
    WHERE f.aggregate_seq IS NOT NULL AND f.next_attempt_at <= now() - $2::bigint * interval '1 millisecond'
), parked AS (
    UPDATE event_publication s SET next_attempt_at = 'infinity'
    WHERE s.event_id = ANY (ARRAY(SELECT event_id FROM blocked))
      AND s.status = 'PENDING' AND s.next_attempt_at <> 'infinity' AND s.aggregate_seq IS NOT NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM front), (SELECT count(*) FROM parked)
)SQL", 3);

// The sweep behind V22's trigger: per parked aggregate (one descent of
// event_publication_parked_idx each, in key order after ($1, $2), at most $3 of them), the
// first unfinished event is released when it is parked. Returns the aggregates read, the
// last of them, and the events released. Releasing is always safe: the claim's ordering
// check still decides.
const std::string kReleaseParkedSql = R"SQL(
WITH RECURSIVE aggregates AS (
    (SELECT p.company_id, p.aggregate_key, 1 AS n FROM event_publication p
     WHERE p.next_attempt_at = 'infinity' AND p.status = 'PENDING' AND p.aggregate_seq IS NOT NULL
       AND (p.company_id, p.aggregate_key) > ($1::text, $2::text)
     ORDER BY p.company_id, p.aggregate_key LIMIT 1)
    UNION ALL
    SELECT x.company_id, x.aggregate_key, a.n + 1 FROM aggregates a CROSS JOIN LATERAL (
        SELECT p.company_id, p.aggregate_key FROM event_publication p
        WHERE p.next_attempt_at = 'infinity' AND p.status = 'PENDING' AND p.aggregate_seq IS NOT NULL
          AND (p.company_id, p.aggregate_key) > (a.company_id, a.aggregate_key)
        ORDER BY p.company_id, p.aggregate_key LIMIT 1) x
    WHERE a.n < $3
), heads AS (
    SELECT h.event_id FROM aggregates a CROSS JOIN LATERAL (
        SELECT f.event_id, f.status, f.next_attempt_at FROM event_publication f
        WHERE f.company_id = a.company_id AND f.aggregate_key = a.aggregate_key AND f.aggregate_seq IS NOT NULL
          AND f.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')
        ORDER BY f.aggregate_seq LIMIT 1) h
    WHERE h.status = 'PENDING' AND h.next_attempt_at = 'infinity'
), released AS (
    UPDATE event_publication e SET next_attempt_at = )SQL" + db::due_since("e") + R"SQL(
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM heads)) AND e.status = 'PENDING' AND e.next_attempt_at = 'infinity'
    RETURNING 1
), last AS (
    SELECT company_id, aggregate_key FROM aggregates ORDER BY n DESC LIMIT 1
)
SELECT (SELECT count(*) FROM aggregates), (SELECT company_id FROM last), (SELECT aggregate_key FROM last),
       (SELECT count(*) FROM released)
)SQL";

void prepare_once(pqxx::connection& conn) {
    db::prepare_statement(conn, "outbox_claim", kClaimSql);
    db::prepare_statement(conn, "outbox_claim_suspect", kClaimSuspectSql);
    db::prepare_statement(conn, "outbox_finish", kFinishSql);
    db::prepare_statement(conn, "outbox_extend", kExtendSql);
    db::prepare_statement(conn, "outbox_release", kReleaseSql);
    db::prepare_statement(conn, "outbox_release_untracked", kReleaseUntrackedSql);
    db::prepare_statement(conn, "outbox_rescue", kRescueSql);
    db::prepare_statement(conn, "outbox_park", kParkSql);
    db::prepare_statement(conn, "outbox_release_parked", kReleaseParkedSql);
}

std::vector<std::string> split_names(const pqxx::field& field) {
    std::vector<std::string> names;
    if (field.is_null()) return names;
    const std::string text = field.c_str();
    std::size_t start = 0;
    while (start <= text.size()) {
        const auto comma = text.find(',', start);
        names.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return names;
}

}  // namespace

std::string new_incarnation() {
    std::random_device random;
    std::uniform_int_distribution<std::uint64_t> digits;
    char text[17];
    std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digits(random)));
    return text;
}

// Every method is a single statement, which PostgreSQL runs atomically on its own; running
// it without BEGIN/COMMIT saves two round trips per claim, finish and heartbeat.
LeaseStore::LeaseStore(pqxx::connection& conn) : conn_(conn) { prepare_once(conn_); }

std::vector<ClaimedEvent> LeaseStore::claim(const std::vector<std::string>& event_types, int limit,
                                            const LeaseOwner& owner, std::chrono::milliseconds lease,
                                            ClaimKind kind) {
    std::vector<ClaimedEvent> claimed;
    if (event_types.empty() || limit <= 0) return claimed;
    const bool suspect = kind == ClaimKind::Suspect;
    const pqxx::result rows =
        db::exec_statement(conn_, suspect ? "outbox_claim_suspect" : "outbox_claim", suspect ? kClaimSuspectSql : kClaimSql,
                           db::pg_array(event_types), suspect ? 1 : limit, owner.host_id, static_cast<long long>(lease.count()),
                           owner.incarnation, time_);
    claimed.reserve(rows.size());
    for (const auto& row : rows) {
        ClaimedEvent item;
        item.event.id = row[0].c_str();
        item.event.type = row[1].c_str();
        item.event.company_id = row[2].c_str();
        item.event.aggregate_key = row[3].c_str();
        item.event.payload_json = row[4].c_str();
        item.event.attempt = row[5].as<int>();
        item.lease_token = row[6].c_str();
        item.event.occurred_at = std::chrono::system_clock::time_point{std::chrono::microseconds{row[7].as<long long>()}};
        item.consumed_by = split_names(row[8]);
        item.trace.traceparent = row[9].c_str();
        item.trace.tracestate = row[10].c_str();
        claimed.push_back(std::move(item));
    }
    return claimed;
}

std::vector<std::string> LeaseStore::finish(const std::vector<Finish>& batch) {
    std::vector<std::string> ids, tokens, statuses, delays, consumed_ids, consumed_names;
    std::vector<std::optional<std::string>> codes;
    const auto now = std::chrono::system_clock::now();
    for (const auto& item : batch) {
        ids.push_back(item.lease.event_id);
        tokens.push_back(item.lease.lease_token);
        statuses.emplace_back(core::to_text(item.transition.status));
        long long delay_ms = 0;
        if (item.transition.next_attempt_at) {
            delay_ms = std::max<long long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(*item.transition.next_attempt_at - now).count());
        }
        delays.push_back(std::to_string(delay_ms));
        codes.push_back(item.transition.error_code.empty() ? std::nullopt
                                                           : std::optional<std::string>(item.transition.error_code));
        for (const auto& handler : item.consumed_by) {
            consumed_ids.push_back(item.lease.event_id);
            consumed_names.push_back(handler);
        }
    }
    const pqxx::result rows =
        db::exec_statement(conn_, "outbox_finish", kFinishSql, db::pg_array(ids), db::pg_array(tokens), db::pg_array(statuses),
                           db::pg_array(delays), db::pg_array(codes), db::pg_array(consumed_ids), db::pg_array(consumed_names), time_);
    std::vector<std::string> applied;
    applied.reserve(rows.size());
    for (const auto& row : rows) applied.emplace_back(row[0].c_str());
    return applied;
}

std::vector<std::string> LeaseStore::extend(const std::vector<LeaseRef>& leases, std::chrono::milliseconds lease) {
    std::vector<std::string> ids, tokens;
    for (const auto& ref : leases) {
        ids.push_back(ref.event_id);
        tokens.push_back(ref.lease_token);
    }
    const pqxx::result rows =
        db::exec_statement(conn_, "outbox_extend", kExtendSql, db::pg_array(ids), db::pg_array(tokens),
                           static_cast<long long>(lease.count()), time_);
    std::vector<std::string> kept;
    for (const auto& row : rows) kept.emplace_back(row[0].c_str());
    return kept;
}

int LeaseStore::release(const std::vector<LeaseRef>& leases) {
    if (leases.empty()) return 0;
    std::vector<std::string> ids, tokens;
    for (const auto& ref : leases) {
        ids.push_back(ref.event_id);
        tokens.push_back(ref.lease_token);
    }
    const pqxx::result rows = db::exec_statement(conn_, "outbox_release", kReleaseSql, db::pg_array(ids), db::pg_array(tokens), time_);
    return static_cast<int>(rows.affected_rows());
}

int LeaseStore::release_untracked(const LeaseOwner& owner, const std::string& since,
                                  const std::vector<std::string>& tracked_tokens) {
    const pqxx::result rows = db::exec_statement(conn_, "outbox_release_untracked", kReleaseUntrackedSql, owner.host_id,
                                                 since, db::pg_array(tracked_tokens), owner.incarnation, time_);
    return static_cast<int>(rows.affected_rows());
}

std::string LeaseStore::server_time() {
    return pqxx::nontransaction(conn_).exec("SELECT now()::text")[0][0].c_str();
}

int LeaseStore::rescue_expired(int max_attempts, int limit) {
    const pqxx::result rows = db::exec_statement(conn_, "outbox_rescue", kRescueSql, max_attempts, limit, time_);
    return static_cast<int>(rows.affected_rows());
}

ParkPass LeaseStore::park_blocked(int window, std::chrono::milliseconds min_wait) {
    const pqxx::result rows = db::exec_statement(conn_, "outbox_park", kParkSql, window,
                                                 static_cast<long long>(min_wait.count()), time_);
    return {rows[0][0].as<int>(), rows[0][1].as<int>()};
}

int LeaseStore::release_parked(int aggregates_per_statement) {
    std::string company;
    std::string key;
    int released = 0;
    for (;;) {
        const pqxx::result rows = db::exec_statement(conn_, "outbox_release_parked", kReleaseParkedSql, company, key,
                                                     aggregates_per_statement);
        released += rows[0][3].as<int>();
        if (rows[0][0].as<int>() < aggregates_per_statement) return released;
        company = rows[0][1].as<std::string>();
        key = rows[0][2].as<std::string>();
    }
}

std::string fence_statement(pqxx::connection_base& conn, const LeaseRef& lease,
                            const std::vector<std::string>& handler_names, bool complete) {
    // Literals, not parameters: the statement travels with the COMMIT in one simple query.
    std::string sql = "SELECT outbox_fence('";
    sql += conn.esc(lease.event_id);
    sql += "'::uuid, '";
    sql += conn.esc(lease.lease_token);
    sql += "'::uuid, '";
    sql += conn.esc(db::pg_array(handler_names));
    sql += complete ? "'::text[], true)" : "'::text[], false)";
    return sql;
}

}  // namespace outbox::lease
