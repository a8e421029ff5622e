#pragma once

#include <string>

/// Every statement whose main table is one of the event tables (event_publication and its
/// child event_consumption), named by use. Callers build the parameters, read the results
/// and own the transactions; statements of other tables stay with their callers.
namespace outbox::db::event_sql {

// ---------------------------------------------------------------------------------------
// The ordering rule
// ---------------------------------------------------------------------------------------

/// The ordering rule, written once for the claim, the gauges, `outboxd status` and the
/// event view: a row `earlier` of event_publication holds back the row `later` when both
/// belong to the same aggregate (company_id, aggregate_key), `earlier` comes first in it
/// and is unfinished (PENDING, PROCESSING, RETRY_WAIT) or waits for an operator
/// (REVIEW_REQUIRED). Events without a position (aggregate_seq NULL) are in no order.
/// A SQL condition on the aliases `earlier` and `later`.
inline std::string holds_back(const std::string& earlier, const std::string& later) {
    return earlier + ".company_id = " + later + ".company_id AND " + earlier + ".aggregate_key = " + later +
           ".aggregate_key AND " + earlier + ".aggregate_seq < " + later + ".aggregate_seq AND " + earlier +
           ".aggregate_seq IS NOT NULL AND " + earlier +
           ".status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')";
}

/// The same rule seen from the other side: the row `later` comes after the row `earlier`
/// in their aggregate and is unfinished or waits for an operator, so it is what a finishing
/// `earlier` may release. A SQL condition on the aliases `later` and `earlier`.
inline std::string waits_behind(const std::string& later, const std::string& earlier) {
    return later + ".company_id = " + earlier + ".company_id AND " + later + ".aggregate_key = " + earlier +
           ".aggregate_key AND " + later + ".aggregate_seq > " + earlier + ".aggregate_seq AND " + later +
           ".aggregate_seq IS NOT NULL AND " + later +
           ".status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')";
}

/// When the row `alias` of event_publication became due: its publication, or the time its
/// publisher asked for (deliver_after) when that is later. Lateness is counted from here, so
/// a delayed event is not late before its time. A SQL expression.
inline std::string due_since(const std::string& alias) {
    return "greatest(" + alias + ".occurred_at, " + alias + ".deliver_after)";
}

// ---------------------------------------------------------------------------------------
// Bookkeeping: claim, finish, extend, release, release_untracked, rescue, park,
// release_parked (lease::LeaseStore), retention, and the handler runner's re-read
// ---------------------------------------------------------------------------------------

namespace detail {

// Every lease statement (claim to park) reads the time from its last parameter, the server's
// now() when that is empty: tests move time by setting it (LeaseStore::set_time), production
// never does.
inline std::string with_time(std::string sql, int parameter) {
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
inline const std::string kAggregateHeadFilter =
    "\n      AND (aggregate_seq IS NULL OR NOT EXISTS (SELECT 1 FROM event_publication earlier WHERE " +
    holds_back("earlier", "event_publication") + "))\n";

// Every claim ends alike: its `due` rows become PROCESSING with a new lease (the claimed
// CTE), and the claimed events are read back (the SELECT list; the caller adds its FROM).
inline const std::string kClaimed = R"SQL(), claimed AS (
    UPDATE event_publication e
    SET status = 'PROCESSING', attempt_count = e.attempt_count + 1, lease_owner = $3,
        lease_incarnation = nullif($5, ''), lease_token = gen_random_uuid(), lease_expires_at = now() + $4::bigint * interval '1 millisecond',
        version = e.version + 1, updated_at = now()
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM due))
    RETURNING e.event_id, e.event_type, e.company_id, e.aggregate_key, e.payload, e.attempt_count,
              e.lease_token, e.occurred_at, e.version, e.traceparent, e.tracestate, e.replay_handler
)
SELECT c.event_id::text, c.event_type, c.company_id, coalesce(c.aggregate_key, ''), c.payload::text,
       c.attempt_count, c.lease_token::text, (extract(epoch FROM c.occurred_at) * 1000000)::bigint,
       CASE WHEN c.version <= 2 AND c.attempt_count <= 1 THEN NULL
            ELSE (SELECT string_agg(handler_name, ',') FROM event_consumption ec WHERE ec.event_id = c.event_id) END,
       coalesce(c.traceparent, ''), coalesce(c.tracestate, ''), coalesce(c.replay_handler, ''))SQL";

// Claim: the due-row CTE walks a partial index in next_attempt_at order and skips rows
// another host has locked; attempt_count is counted here so a crash still counts. The
// update finds the locked rows by key (= ANY of their ids), never by a join the planner
// could turn into a walk of the whole primary key. Earlier
// consumptions are looked up only for events claimed before (version 2 after the claim
// means published and never touched since): on a large table that lookup is an index
// descent per event that first attempts never need.
inline std::string claim_sql(const char* due_filter) {
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
)SQL";
    return sql + kClaimed + "\nFROM claimed c\n";
}

}  // namespace detail

// The lock fair claims take, in a statement of their own before the claim, while any company
// is capped (tenants.*.max_concurrency): one claimer at a time across the fleet.
inline const std::string kTenantCapLock = "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('outboxd:tenant-caps'))";

// The fair claim (docs/design.md, "Fair tenants"): companies with unfinished events are
// visited in company_id order from just after $7 (the company the host's previous claim
// reached), wrapping around, at most $2 of them, each one descent of
// event_publication_company_due_idx; each visited company gets a share of the $2 events
// weighted by $9 (its weight among the visited; companies not in $8 weigh 1), taken in its
// own next_attempt_at order, and no more than its cap ($10, else $11 when not 0) minus its
// events already PROCESSING. The caps are read only with $12, when the caller holds the
// fleet's tenant lock (so two hosts cannot both fill the same room) and the statement's
// snapshot was taken after it. Each row carries its company's visit number and how many it
// could take, so the caller knows whether more may be due and where to start next time.
inline const std::string kClaimFair = detail::with_time(R"SQL(
WITH RECURSIVE walk(company_id, n) AS (
    (SELECT company_id, 1 FROM event_publication
     WHERE status IN ('PENDING', 'RETRY_WAIT') AND company_id > $7
     ORDER BY company_id LIMIT 1)
    UNION ALL
    SELECT nxt.company_id, w.n + 1 FROM walk w CROSS JOIN LATERAL (
        SELECT e.company_id FROM event_publication e
        WHERE e.status IN ('PENDING', 'RETRY_WAIT') AND e.company_id > w.company_id
        ORDER BY e.company_id LIMIT 1) nxt
    WHERE w.n < $2
), wrap(company_id, n) AS (
    (SELECT company_id, (SELECT count(*) FROM walk)::integer + 1 FROM event_publication
     WHERE status IN ('PENDING', 'RETRY_WAIT') AND company_id <= $7 AND (SELECT count(*) FROM walk) < $2
     ORDER BY company_id LIMIT 1)
    UNION ALL
    SELECT nxt.company_id, w.n + 1 FROM wrap w CROSS JOIN LATERAL (
        SELECT e.company_id FROM event_publication e
        WHERE e.status IN ('PENDING', 'RETRY_WAIT') AND e.company_id > w.company_id AND e.company_id <= $7
        ORDER BY e.company_id LIMIT 1) nxt
    WHERE w.n < $2
), visited AS (
    SELECT v.company_id, v.n, coalesce(t.weight, 1) AS weight, coalesce(nullif(t.cap, 0), nullif($11::integer, 0)) AS cap
    FROM (SELECT company_id, n FROM walk UNION ALL SELECT company_id, n FROM wrap) v
    LEFT JOIN ROWS FROM (pg_catalog.unnest($8::text[]), pg_catalog.unnest($9::integer[]), pg_catalog.unnest($10::integer[]))
        AS t(company_id, weight, cap) ON t.company_id = v.company_id
), running AS MATERIALIZED (
    SELECT company_id, count(*)::integer AS n FROM event_publication
    WHERE $12::boolean AND status = 'PROCESSING'
    GROUP BY company_id
), sized AS MATERIALIZED (
    SELECT v.company_id, v.n,
           greatest(0, least(greatest(1, ($2::bigint * v.weight / (SELECT sum(weight) FROM visited))::integer),
                             coalesce(v.cap - coalesce((SELECT r.n FROM running r WHERE r.company_id = v.company_id), 0),
                                      $2))) AS room
    FROM visited v
), due AS (
    SELECT d.event_id, s.n, s.room FROM sized s CROSS JOIN LATERAL (
        SELECT event_id FROM event_publication
        WHERE company_id >= s.company_id AND company_id <= s.company_id AND next_attempt_at <= now() AND status IN ('PENDING', 'RETRY_WAIT')
          AND (status = 'PENDING' OR last_error_code IS DISTINCT FROM 'WORKER_LOST'))SQL" +
                                                                        detail::kAggregateHeadFilter + R"SQL(
          AND event_type = ANY($1::text[])
        -- One company's due rows, read in event_publication_company_due_idx's order. The company
        -- is a range (>= and <=), not company_id = ...: with an equality the planner drops
        -- company_id from the ORDER BY, and statistics taken while one company filled the table
        -- then make event_publication_due_idx look as good, so each other company's claim would
        -- filter that whole backlog (measured: 59 ms against 0.1 ms per company with 200,000 rows).
        ORDER BY company_id, next_attempt_at
        LIMIT s.room
        FOR UPDATE SKIP LOCKED) d
    WHERE s.room > 0
    LIMIT $2
)SQL" + detail::kClaimed + R"SQL(, d.n, d.room
FROM claimed c JOIN due d ON d.event_id = c.event_id
)SQL", 6);

// Suspects (their previous host died mid-attempt) are claimed one at a time per host and
// run in a lane of their own, so a crash can be blamed on them (see kRescue).
inline const std::string kClaimSuspect =
    detail::with_time(detail::claim_sql("status = 'RETRY_WAIT' AND last_error_code = 'WORKER_LOST'"), 6);

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
inline const std::string kFinish = detail::with_time(R"SQL(
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
    RETURNING e.event_id, i.lease_token, i.status, e.company_id, e.aggregate_key, e.aggregate_seq, e.attempt_count,
              e.next_attempt_at
), released AS (
    SELECT pg_catalog.pg_notify('outboxd_events', n.event_type)
    FROM done d
    CROSS JOIN LATERAL (
        SELECT later.event_type FROM event_publication later
        WHERE )SQL" + waits_behind("later", "d") + R"SQL(
        ORDER BY later.aggregate_seq
        LIMIT 1
    ) n
    WHERE d.status = 'COMPLETED' AND d.aggregate_seq IS NOT NULL
), consumed AS (
    INSERT INTO event_consumption (event_id, handler_name)
    SELECT c.event_id, c.handler_name FROM ROWS FROM (pg_catalog.unnest($6::uuid[]), pg_catalog.unnest($7::text[])) AS c(event_id, handler_name)
    WHERE c.event_id IN (SELECT event_id FROM done)
    ON CONFLICT DO NOTHING
), recorded AS (
    INSERT INTO outbox_attempt (event_id, company_id, attempt, handler, host, started_at, ended_at, outcome, error_code,
                                retry_after)
    SELECT a.event_id, d.company_id, d.attempt_count, a.handler, $15, pg_catalog.to_timestamp(a.started_us / 1e6),
           pg_catalog.to_timestamp(a.ended_us / 1e6), a.outcome, a.error_code,
           CASE WHEN d.status = 'RETRY_WAIT' AND a.outcome <> 'succeeded' THEN d.next_attempt_at END
    FROM ROWS FROM (pg_catalog.unnest($9::uuid[]), pg_catalog.unnest($10::text[]), pg_catalog.unnest($11::bigint[]),
                    pg_catalog.unnest($12::bigint[]), pg_catalog.unnest($13::text[]), pg_catalog.unnest($14::text[]))
        AS a(event_id, handler, started_us, ended_us, outcome, error_code)
    JOIN done d ON d.event_id = a.event_id
)
SELECT lease_token::text FROM done WHERE (SELECT count(*) FROM released) >= 0
)SQL", 8);

// Extend: rows another transaction holds locked right now (a handler's fence committing,
// perhaps waiting for a synchronous standby) are skipped rather than waited for, so one
// locked row cannot hold back every other lease of the host (review F10). A skipped row
// still carries this host's token in the statement's snapshot and is reported kept: the
// next beat extends it, or finds it gone. The rescuer skips locked rows too.
inline const std::string kExtend = detail::with_time(R"SQL(
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

namespace detail {

// A released event is due again at once, its attempt given back.
inline const std::string kReleaseSet = R"SQL(
UPDATE event_publication e
SET status = CASE WHEN e.attempt_count <= 1 THEN 'PENDING' ELSE 'RETRY_WAIT' END,
    attempt_count = greatest(e.attempt_count - 1, 0),
    lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
    version = e.version + 1, updated_at = now()
)SQL";

}  // namespace detail

inline const std::string kRelease = detail::with_time(detail::kReleaseSet + R"SQL(
FROM ROWS FROM (pg_catalog.unnest($1::uuid[]), pg_catalog.unnest($2::uuid[])) AS r(event_id, lease_token)
WHERE e.event_id = ANY($1::uuid[]) AND e.event_id = r.event_id AND e.lease_token = r.lease_token
)SQL", 3);

// Leases of this process ($1 its host id, $4 its incarnation, claimed at or after $2, the
// server's clock when it started claiming) that it no longer tracks ($3: every token it does
// track). The incarnation keeps another live process with the same host_id out (review F5);
// a lease of a former process with the same host_id is left to the rescuer and its
// quarantine rules.
inline const std::string kReleaseUntracked = detail::with_time(detail::kReleaseSet + R"SQL(
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
inline const std::string kRescue = detail::with_time(R"SQL(
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
    SELECT e.event_id, e.company_id, e.attempt_count, e.lease_owner, e.updated_at AS claimed_at,
           e.last_error_code IS DISTINCT FROM 'WORKER_LOST'
               AND e.lease_owner IN (SELECT lease_owner FROM blamed_owner) AS bystander
    FROM event_publication e
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM expired))
), moved AS (
    UPDATE event_publication e
    SET status = CASE WHEN NOT r.bystander AND e.attempt_count >= $1 THEN 'REVIEW_REQUIRED' ELSE 'RETRY_WAIT' END,
        attempt_count = CASE WHEN r.bystander THEN greatest(e.attempt_count - 1, 0) ELSE e.attempt_count END,
        next_attempt_at = now(), last_error_code = 'WORKER_LOST',
        lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
        version = e.version + 1, updated_at = now()
    FROM rescued r
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM expired)) AND e.event_id = r.event_id
    RETURNING e.event_id, e.status
), recorded AS (
    -- The lost attempt: from its claim (updated_at is not moved by lease extensions) to now.
    INSERT INTO outbox_attempt (event_id, company_id, attempt, host, started_at, ended_at, outcome, error_code,
                                retry_after)
    SELECT r.event_id, r.company_id, r.attempt_count, coalesce(r.lease_owner, ''), least(r.claimed_at, now()), now(),
           'worker_lost', 'WORKER_LOST', CASE WHEN m.status = 'RETRY_WAIT' THEN now() END
    FROM moved m JOIN rescued r ON r.event_id = m.event_id
    WHERE $4::boolean
)
SELECT count(*)::integer FROM moved
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
inline const std::string kPark = detail::with_time(R"SQL(
WITH front AS (
    SELECT f.event_id, f.company_id, f.aggregate_key, f.aggregate_seq, f.next_attempt_at FROM event_publication f
    WHERE f.status IN ('PENDING', 'RETRY_WAIT') AND f.next_attempt_at <= now()
    ORDER BY f.next_attempt_at
    LIMIT $1
), blocked AS (
    SELECT f.event_id FROM front f
    CROSS JOIN LATERAL (
        SELECT 1 FROM event_publication earlier
        WHERE )SQL" + holds_back("earlier", "f") + R"SQL(
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
inline const std::string kReleaseParked = R"SQL(
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
    UPDATE event_publication e SET next_attempt_at = )SQL" + due_since("e") + R"SQL(
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM heads)) AND e.status = 'PENDING' AND e.next_attempt_at = 'infinity'
    RETURNING 1
), last AS (
    SELECT company_id, aggregate_key FROM aggregates ORDER BY n DESC LIMIT 1
)
SELECT (SELECT count(*) FROM aggregates), (SELECT company_id FROM last), (SELECT aggregate_key FROM last),
       (SELECT count(*) FROM released)
)SQL";

namespace detail {

// The inner SELECT walks the completed_at partial index of one finished status (COMPLETED
// or DISCARDED) oldest first; the outer status check keeps the DELETE honest even if a row
// changed since (nothing moves rows out of either status today).
inline std::string delete_batch_sql(const char* status) {
    const std::string quoted = std::string("'") + status + "'";
    return R"SQL(
DELETE FROM event_publication
WHERE event_id IN (
    SELECT event_id FROM event_publication
    WHERE status = )SQL" + quoted + R"SQL(
      AND completed_at < coalesce($2::timestamptz, now()) - $1::bigint * interval '1 millisecond'
    ORDER BY completed_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED)
  AND status = )SQL" + quoted;
}

}  // namespace detail

inline const std::string kDeleteCompleted = detail::delete_batch_sql("COMPLETED");
inline const std::string kDeleteDiscarded = detail::delete_batch_sql("DISCARDED");

// A consumption row, or the event COMPLETED (a first-attempt completion writes no rows;
// hosts of the previous release write them): either way the handler's work is in.
inline constexpr const char* kConsumedOrCompleted =
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM event_consumption WHERE event_id = $1::uuid AND handler_name = $2) "
    "OR EXISTS (SELECT 1 FROM event_publication WHERE event_id = $1::uuid AND status = 'COMPLETED')";

// ---------------------------------------------------------------------------------------
// Operator actions: retry, discard, cancel, bulk re-drive (operations::)
// ---------------------------------------------------------------------------------------

// FOR UPDATE serializes concurrent retries of one event; under READ COMMITTED the statements
// after it see whatever the request it waited for committed.
inline constexpr const char* kLockEvent = R"SQL(
SELECT company_id, status, version, attempt_count, event_type
FROM event_publication WHERE event_id = $1::uuid FOR UPDATE
)SQL";
// The API's caller locks only a row of its own company: another company's event is never
// locked nor waited for, so it answers exactly like a missing one (no BUSY-vs-403 oracle).
inline constexpr const char* kLockOwnEvent = R"SQL(
SELECT company_id, status, version, attempt_count, event_type
FROM event_publication WHERE event_id = $1::uuid AND company_id = $2 FOR UPDATE
)SQL";

// A one-event retry (outbox_manual_retry records it).
inline constexpr const char* kRedriveOne = R"SQL(
UPDATE event_publication
SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status = 'REVIEW_REQUIRED' AND version = $2
RETURNING version
)SQL";

inline constexpr const char* kDiscard = R"SQL(
UPDATE event_publication
SET status = 'DISCARDED', completed_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status IN ('REVIEW_REQUIRED', 'PENDING', 'RETRY_WAIT') AND version = $2
RETURNING version
)SQL";

// A cancel is a discard of an event that has not failed yet: same record, audit and checks.
inline constexpr const char* kCancel = R"SQL(
UPDATE event_publication
SET status = 'DISCARDED', completed_at = now(), version = version + 1,
    lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE event_id = $1::uuid AND status IN ('PENDING', 'RETRY_WAIT') AND version = $2
RETURNING version
)SQL";

// The aggregate's next waiting events may have other types than the discarded one: wake
// the hosts that handle those (delivered on commit).
inline const std::string kNotifySuccessors = R"SQL(
SELECT pg_notify('outboxd_events', t.event_type)
FROM (SELECT DISTINCT n.event_type
      FROM event_publication d
      JOIN event_publication n ON )SQL" + waits_behind("n", "d") + R"SQL(
      WHERE d.event_id = $1::uuid) t
)SQL";

// The events a bulk re-drive takes, oldest first; another request's locked rows are skipped.
inline constexpr const char* kBulkRetrySelect = R"SQL(
SELECT event_id::text, attempt_count FROM event_publication
WHERE status = 'REVIEW_REQUIRED'
  AND ($1::text IS NULL OR company_id = $1)
  AND ($2::text IS NULL OR event_type = $2)
  AND ($3::text IS NULL OR last_error_code = $3)
  AND ($4::timestamptz IS NULL OR occurred_at < $4::timestamptz)
  AND ($6::uuid[] IS NULL OR event_id = ANY ($6::uuid[]))
  AND (NOT $7::boolean OR last_error_code IS NULL)
ORDER BY occurred_at, event_id
LIMIT $5
FOR UPDATE SKIP LOCKED
)SQL";

// Exactly a one-event retry per event (see RetryService): PENDING, attempt_count 0, due now,
// version + 1, no lease; each with its manual-retry and audit rows. The per-event key hash
// is derived from the request's key, so each row keeps outbox_manual_retry's unique key.
inline constexpr const char* kBulkRedrive = R"SQL(
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[]) AS i(event_id, previous_attempt_count)
), redriven AS (
    UPDATE event_publication e
    SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), version = e.version + 1,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
    FROM input i
    WHERE e.event_id = i.event_id AND e.event_id = ANY ($1::uuid[]) AND e.status = 'REVIEW_REQUIRED'
    RETURNING e.event_id, e.company_id, e.event_type, e.version AS new_version, i.previous_attempt_count
), recorded AS (
    INSERT INTO outbox_manual_retry (event_id, company_id, actor, reason, idempotency_key_hash, request_hash,
                                     previous_attempt_count, previous_status, previous_version, new_version)
    SELECT event_id, company_id, $3, $4, encode(sha256(convert_to($5 || ':' || event_id::text, 'UTF8')), 'hex'), $6,
           previous_attempt_count, 'REVIEW_REQUIRED', new_version - 1, new_version
    FROM redriven
    RETURNING id, event_id, company_id, previous_attempt_count, previous_version, new_version
), audited AS (
    INSERT INTO audit_event (actor, action, company_id, target_id, detail)
    SELECT $3, 'outbox.manual_retry', company_id, event_id::text,
           jsonb_build_object('manual_retry_id', id, 'bulk_retry_id', $7::bigint, 'channel', $8::text,
                              'previous_status', 'REVIEW_REQUIRED', 'previous_attempt_count', previous_attempt_count,
                              'previous_version', previous_version, 'new_version', new_version)
    FROM recorded
)
SELECT DISTINCT event_type FROM redriven
)SQL";

// ---------------------------------------------------------------------------------------
// Operator jobs: the events a filter matches, and one batch of an action (operations::)
// ---------------------------------------------------------------------------------------

namespace detail {

// The filter of an operator job, on the alias `p`: $1 company (NULL: every company), $2 the
// statuses (text[]), $3 event types (text[]: the filter's one type, or for a replay the
// types its handler takes, narrowed by the filter's type), $4 last error code, $5 only events without a code, $6
// occurred at or after, $7 occurred before, $8 aggregate key, $9 handler: events of a type
// that handler takes (as any registered host reports it) that it has not consumed yet, and
// $10 occurred at or before (the job's start; NULL: now). NULL parameters match everything.
inline std::string operation_filter(const std::string& p) {
    return p + ".status = ANY ($2::text[])"
           " AND ($1::text IS NULL OR " + p + ".company_id = $1)"
           " AND ($3::text[] IS NULL OR " + p + ".event_type = ANY ($3::text[]))"
           " AND ($4::text IS NULL OR " + p + ".last_error_code = $4)"
           " AND (NOT $5::boolean OR " + p + ".last_error_code IS NULL)"
           " AND ($6::timestamptz IS NULL OR " + p + ".occurred_at >= $6::timestamptz)"
           " AND ($7::timestamptz IS NULL OR " + p + ".occurred_at < $7::timestamptz)"
           " AND ($8::text IS NULL OR " + p + ".aggregate_key = $8)"
           " AND " + p + ".occurred_at <= coalesce($10::timestamptz, now())"
           " AND ($9::text IS NULL OR (" + p + ".event_type IN ("
           "SELECT jsonb_array_elements_text(h.value -> 'event_types') FROM outbox_host o "
           "CROSS JOIN LATERAL jsonb_array_elements(o.handlers) h WHERE h.value ->> 'handler' = $9)"
           " AND NOT EXISTS (SELECT 1 FROM event_consumption c WHERE c.event_id = " + p +
           ".event_id AND c.handler_name = $9)))";
}

// A cursor is (occurred_at, event_id) of the last event a batch read; occurred_at travels
// as microseconds since the epoch so that it comes back exactly.
inline std::string from_micros(const std::string& parameter) {
    return "(timestamptz 'epoch' + " + parameter + "::bigint * interval '1 microsecond')";
}

// The record and audit rows of one event action ($1 ids, $2 previous attempt counts, $3
// previous statuses, $4 previous versions; $5 actor, $6 reason, $7 operation id, $8 channel),
// shaped as the one-event actions write them; the per-event key hash is derived from the
// operation id, so each row keeps the record table's unique key.
inline std::string operation_records(const std::string& table, const std::string& record_key,
                                     const std::string& audit_action, const std::string& extra_detail = "") {
    return R"SQL(
), recorded AS (
    INSERT INTO )SQL" + table + R"SQL( (event_id, company_id, actor, reason, idempotency_key_hash, request_hash,
                                 previous_attempt_count, previous_status, previous_version, new_version)
    SELECT event_id, company_id, $5, $6,
           encode(sha256(convert_to('operation:' || $7 || ':' || event_id::text, 'UTF8')), 'hex'),
           encode(sha256(convert_to('operation:' || $7, 'UTF8')), 'hex'),
           previous_attempt_count, previous_status, previous_version, new_version
    FROM acted
    RETURNING id, event_id, company_id, previous_status, previous_attempt_count, previous_version, new_version
), audited AS (
    INSERT INTO audit_event (actor, action, company_id, target_id, detail)
    SELECT $5, ')SQL" + audit_action + R"SQL(', company_id, event_id::text,
           jsonb_build_object(')SQL" + record_key + R"SQL(', id, 'operation_id', $7::text, 'channel', $8::text,
                              'previous_status', previous_status, 'previous_attempt_count', previous_attempt_count,
                              'previous_version', previous_version, 'new_version', new_version)SQL" +
           extra_detail + R"SQL()
    FROM recorded
)
)SQL";
}

inline const std::string kOperationInput = R"SQL(
WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::integer[], $3::text[], $4::bigint[])
        AS i(event_id, previous_attempt_count, previous_status, previous_version)
), acted AS (
)SQL";

// The events the batch's UPDATE changed, with what the records need.
inline constexpr const char* kOperationReturning = R"SQL(
    FROM input i
    WHERE e.event_id = i.event_id AND e.event_id = ANY ($1::uuid[]) AND e.status = i.previous_status
      AND e.version = i.previous_version
    RETURNING e.event_id, e.company_id, e.event_type, e.aggregate_key, e.aggregate_seq, e.version AS new_version,
              i.previous_attempt_count, i.previous_status, i.previous_version
)SQL";

}  // namespace detail

/// How many events match ($1..$10 as in detail::operation_filter).
inline const std::string kOperationCount =
    "SELECT count(*) FROM event_publication p WHERE " + detail::operation_filter("p");

/// The first $11 matching events, oldest first (a dry run's sample).
inline const std::string kOperationSample = "SELECT p.event_id::text FROM event_publication p WHERE " +
                                            detail::operation_filter("p") +
                                            " ORDER BY p.occurred_at, p.event_id LIMIT $11";

/// One batch's events: the next $13 matching events after the cursor ($11 microseconds, $12
/// event id; NULL: from the start), each with whether this transaction could lock it in an
/// allowed status (SKIP LOCKED: an event another transaction holds, e.g. a claim or an
/// operator acting on it right now, is not waited for) and, if so, its status, attempt count
/// and version. Every read event moves the cursor, locked or not.
inline const std::string kOperationBatch = R"SQL(
WITH candidates AS MATERIALIZED (
    SELECT p.event_id, p.occurred_at FROM event_publication p
    WHERE )SQL" + detail::operation_filter("p") + R"SQL(
      AND ($11::bigint IS NULL OR (p.occurred_at, p.event_id) > ()SQL" + detail::from_micros("$11") + R"SQL(, $12::uuid))
    ORDER BY p.occurred_at, p.event_id
    LIMIT $13
), locked AS (
    SELECT e.event_id, e.status, e.attempt_count, e.version FROM event_publication e
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM candidates)) AND e.status = ANY ($2::text[])
    FOR UPDATE SKIP LOCKED
)
SELECT c.event_id::text, (extract(epoch FROM c.occurred_at) * 1000000)::bigint, l.event_id IS NOT NULL,
       l.status, l.attempt_count, l.version
FROM candidates c LEFT JOIN locked l ON l.event_id = c.event_id
ORDER BY c.occurred_at, c.event_id
)SQL";

/// A batch's re-drive: exactly a one-event retry per locked event (PENDING, attempt_count 0,
/// due now, version + 1, no lease), recorded in outbox_manual_retry and audited as
/// outbox.manual_retry. Returns the count and the types to wake (comma-separated).
inline const std::string kOperationRedrive = detail::kOperationInput + R"SQL(
    UPDATE event_publication e
    SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), version = e.version + 1,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
)SQL" + detail::kOperationReturning +
    detail::operation_records("outbox_manual_retry", "manual_retry_id", "outbox.manual_retry") + R"SQL(
SELECT (SELECT count(*) FROM acted), (SELECT string_agg(DISTINCT event_type, ',') FROM acted)
)SQL";

/// A batch's replay for the handler $9: each locked COMPLETED or DISCARDED event is PENDING
/// again (attempt_count 0, due now, version + 1, no lease) with replay_handler = $9; that
/// handler's consumption row is removed and the other handlers of the event's type (as any
/// registered host reports them) get one, so no host, of any release, calls them. Recorded
/// in outbox_manual_retry and audited as outbox.replay with the handler. Returns the count
/// and the types to wake.
inline const std::string kOperationReplay = detail::kOperationInput + R"SQL(
    UPDATE event_publication e
    SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), completed_at = NULL, replay_handler = $9,
        version = e.version + 1, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
)SQL" + detail::kOperationReturning + R"SQL(
), unconsumed AS (
    DELETE FROM event_consumption c USING acted a WHERE c.event_id = a.event_id AND c.handler_name = $9
), others AS (
    INSERT INTO event_consumption (event_id, handler_name)
    SELECT DISTINCT a.event_id, h.value ->> 'handler'
    FROM acted a
    CROSS JOIN outbox_host o
    CROSS JOIN LATERAL jsonb_array_elements(o.handlers) h
    WHERE h.value ->> 'handler' <> $9 AND (h.value -> 'event_types') ? a.event_type
    ON CONFLICT DO NOTHING
)SQL" + detail::operation_records("outbox_manual_retry", "manual_retry_id", "outbox.replay", ", 'handler', $9::text") +
                                            R"SQL(
SELECT (SELECT count(*) FROM acted), (SELECT string_agg(DISTINCT event_type, ',') FROM acted)
)SQL";

/// Replayed events of the handler $1 not finished yet: a replay job's next batch waits while
/// they are a batch or more ($2).
inline constexpr const char* kReplaysInFlight = R"SQL(
SELECT count(*) >= $2 FROM (
    SELECT 1 FROM event_publication
    WHERE replay_handler = $1 AND status IN ('PENDING', 'RETRY_WAIT', 'PROCESSING')
    LIMIT $2
) r
)SQL";

namespace detail {

// A batch's discard or cancel: as the one-event action (DISCARDED, completed_at now, version
// + 1, no lease), recorded in outbox_discard. Returns the count and the types of the events
// waiting behind them in their aggregates, to wake (V22's trigger already un-parked them).
inline std::string operation_discard(const std::string& audit_action) {
    return kOperationInput + R"SQL(
    UPDATE event_publication e
    SET status = 'DISCARDED', completed_at = now(), version = e.version + 1,
        lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = now()
)SQL" + kOperationReturning + operation_records("outbox_discard", "discard_id", audit_action) + R"SQL(
SELECT (SELECT count(*) FROM acted),
       (SELECT string_agg(DISTINCT n.event_type, ',') FROM acted d
        JOIN event_publication n ON )SQL" + waits_behind("n", "d") + R"SQL(
        WHERE d.aggregate_seq IS NOT NULL)
)SQL";
}

}  // namespace detail

inline const std::string kOperationDiscard = detail::operation_discard("outbox.discard");
inline const std::string kOperationCancel = detail::operation_discard("outbox.cancel");

// ---------------------------------------------------------------------------------------
// Read models: the event view and list, an event's history, the backlog gauges, the
// `status` report, the console's overview and review groups (operations::)
// ---------------------------------------------------------------------------------------

namespace detail {

// The operator's view of an event: never the payload or the dedup key (both may carry
// business data); timestamps as ISO 8601 in UTC. blocked_by: the earliest unfinished or
// reviewed event of the same aggregate that holds this waiting event back (the claim's
// ordering rule), null when nothing does. deliver_after: the time a delayed event was
// published for, null when it was not delayed. next_attempt_at of a parked event (held back by
// its aggregate, see kPark) is the time it became due, not the 'infinity' that parks it. No
// lease_owner: it names the platform's host and pid, which only platform roles see (the fleet).
inline const std::string kEventColumns = R"SQL(
json_build_object(
    'event_id', p.event_id, 'company_id', p.company_id, 'event_type', p.event_type,
    'aggregate_key', p.aggregate_key, 'status', p.status, 'attempt_count', p.attempt_count,
    'next_attempt_at', CASE WHEN p.next_attempt_at = 'infinity' THEN )SQL" + due_since("p") + R"SQL( ELSE p.next_attempt_at END,
    'last_error_code', p.last_error_code, 'version', p.version,
    'occurred_at', p.occurred_at, 'updated_at', p.updated_at, 'completed_at', p.completed_at,
    'lease_expires_at', p.lease_expires_at, 'deliver_after', p.deliver_after,
    'blocked_by', CASE WHEN p.aggregate_seq IS NOT NULL AND p.status IN ('PENDING', 'RETRY_WAIT', 'REVIEW_REQUIRED') THEN
        (SELECT earlier.event_id FROM event_publication earlier WHERE )SQL" + holds_back("earlier", "p") + R"SQL(
         ORDER BY earlier.aggregate_seq LIMIT 1) END,
    'consumed_by', ARRAY(SELECT c.handler_name FROM event_consumption c
                         WHERE c.event_id = p.event_id ORDER BY c.handler_name))::text
)SQL";

}  // namespace detail

inline const std::string kEventGet = std::string("SELECT ") + detail::kEventColumns +
                                     " FROM event_publication p WHERE p.event_id = $1::uuid AND p.company_id = $2";

// Keyset paging on (occurred_at, event_id), newest first; the cursor is the last row's key.
inline const std::string kEventList = std::string("SELECT ") + detail::kEventColumns + R"SQL(,
    (extract(epoch FROM p.occurred_at) * 1000000)::bigint, p.event_id::text
FROM event_publication p
WHERE p.company_id = $1
  AND ($2::text IS NULL OR p.status = $2)
  AND ($3::text IS NULL OR p.event_type = $3)
  AND ($4::bigint IS NULL OR (p.occurred_at, p.event_id) <
       (timestamptz 'epoch' + $4::bigint * interval '1 microsecond', $5::uuid))
  AND ($7::text IS NULL OR p.last_error_code = $7)
ORDER BY p.occurred_at DESC, p.event_id DESC
LIMIT $6
)SQL";

// An event's history: its row, then its consumption rows.
inline constexpr const char* kHistoryEvent = R"SQL(
SELECT status, event_type, to_char(completed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM event_publication WHERE event_id = $1::uuid AND company_id = $2
)SQL";

inline constexpr const char* kHistoryConsumed = R"SQL(
SELECT handler_name, to_char(consumed_at, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM event_consumption WHERE event_id = $1::uuid ORDER BY consumed_at, handler_name
)SQL";

namespace detail {

// Unfinished events (optionally of one company, $3) with the time each became due, and the
// (handler, event type) pairs of $1/$2: the per-handler oldest delay below reads both.
// Shared by /metrics (every company) and the console's overview (one company), so both mean
// the same thing. A delayed event not yet due has a due time ahead: it adds no delay.
inline const std::string kLiveCtes = R"SQL(
live AS MATERIALIZED (
    SELECT event_id, event_type, )SQL" + due_since("event_publication") + R"SQL( AS due_at FROM event_publication
    WHERE (status IN ('PENDING', 'RETRY_WAIT') OR status = 'PROCESSING') AND ($3::text IS NULL OR company_id = $3)
), handler_types AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[])) AS h(handler, event_type)
)
)SQL";

// {"<handler>": seconds}: per handler, how long the earliest due live event of a type it
// supports that it has not consumed yet has been due (handlers with none are absent).
inline constexpr const char* kHandlerDelays = R"SQL(
    (SELECT coalesce(json_object_agg(handler, delay), '{}')::text FROM (
        SELECT h.handler, greatest(extract(epoch FROM now() - min(l.due_at)), 0)::float8 AS delay
        FROM handler_types h JOIN live l ON l.event_type = h.event_type
        WHERE NOT EXISTS (SELECT 1 FROM event_consumption c
                          WHERE c.event_id = l.event_id AND c.handler_name = h.handler)
        GROUP BY h.handler) d)
)SQL";

// Waiting events held back by an earlier unfinished or reviewed event of their aggregate.
inline std::string held_back(const std::string& later) {
    return "EXISTS (SELECT 1 FROM event_publication earlier WHERE " + holds_back("earlier", later) + ")";
}

}  // namespace detail

// Each count names one status so it matches a partial index predicate (due, lease, review);
// `status <> 'COMPLETED'` would match none and read every COMPLETED row. Unfinished means
// PENDING, RETRY_WAIT (due or not: a retry waiting for its backoff is still late) and
// PROCESSING; REVIEW_REQUIRED waits for a person and has its own gauge. Blocked: waiting
// events held back by an unfinished or reviewed earlier event of their aggregate, both
// sides read from the aggregate index (unfinished keyed events only).
inline const std::string kGauges = "WITH " + detail::kLiveCtes + R"SQL(
SELECT
    (SELECT count(*) FROM event_publication WHERE status = 'PENDING'),
    (SELECT count(*) FROM event_publication WHERE status = 'RETRY_WAIT'),
    (SELECT count(*) FROM event_publication WHERE status = 'PROCESSING'),
    (SELECT count(*) FROM event_publication WHERE status = 'REVIEW_REQUIRED'),
    (SELECT greatest(coalesce(extract(epoch FROM now() - min(due_at)), 0), 0)::float8 FROM live),
)SQL" + detail::kHandlerDelays + R"SQL(,
    (SELECT coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::float8 FROM event_publication
     WHERE status = 'REVIEW_REQUIRED'),
    (SELECT count(*) FROM event_publication w
     WHERE w.aggregate_seq IS NOT NULL AND w.status IN ('PENDING', 'RETRY_WAIT')
       AND EXISTS (SELECT 1 FROM event_publication earlier WHERE )SQL" + holds_back("earlier", "w") + "))";

// The per-handler oldest delays alone (the console's overview, one company).
inline const std::string kHandlerOldestDelays = "WITH " + detail::kLiveCtes + " SELECT " + detail::kHandlerDelays;

// The `status` report: counts per status and type, the oldest unfinished event's delay,
// blocked events, unhandled types and the review queue.
inline constexpr const char* kStatusCounts = R"SQL(
SELECT status, event_type, count(*) FROM event_publication GROUP BY status, event_type ORDER BY status, event_type
)SQL";

inline const std::string kStatusOldest = "SELECT greatest(coalesce(extract(epoch FROM now() - min(" +
                                         due_since("event_publication") +
                                         ")), 0), 0)::bigint FROM event_publication "
                                         "WHERE status IN ('PENDING', 'RETRY_WAIT', 'PROCESSING')";

inline const std::string kStatusBlocked =
    "SELECT count(*) FROM event_publication w WHERE w.aggregate_seq IS NOT NULL "
    "AND w.status IN ('PENDING', 'RETRY_WAIT') AND " + detail::held_back("w");

// A type is reported unhandled when it has due events nobody has ever attempted for over a
// minute while nothing of that type is in flight: no host in the fleet claims it. Events
// blocked behind an earlier one of their aggregate are not counted: they are waiting, not lost.
inline const std::string kStatusUnhandled =
    "SELECT event_type, count(*), extract(epoch FROM now() - min(" + due_since("p") + "))::bigint "
    "FROM event_publication p "
    "WHERE status = 'PENDING' AND attempt_count = 0 AND next_attempt_at < now() - interval '1 minute' "
    "AND NOT EXISTS (SELECT 1 FROM event_publication q WHERE q.status = 'PROCESSING' AND q.event_type = p.event_type) "
    "AND NOT (p.aggregate_seq IS NOT NULL AND " + detail::held_back("p") + ") "
    "GROUP BY event_type ORDER BY event_type";

// Heads of their aggregate (nothing holds them back) that hold back waiting events and whose
// type is none of $1: the claim never takes them, so their successors never run.
inline const std::string kUnhandledHeads =
    "SELECT h.event_id::text, h.company_id, h.event_type, h.status, "
    "(SELECT count(*) FROM event_publication later WHERE later.status IN ('PENDING', 'RETRY_WAIT') AND " +
    holds_back("h", "later") + ") AS successors "
    "FROM event_publication h "
    "WHERE h.status IN ('PENDING', 'RETRY_WAIT') AND h.aggregate_seq IS NOT NULL "
    "AND ($2::text IS NULL OR h.company_id = $2) AND h.event_type <> ALL ($1::text[]) "
    "AND NOT EXISTS (SELECT 1 FROM event_publication earlier WHERE " + holds_back("earlier", "h") + ") "
    "AND EXISTS (SELECT 1 FROM event_publication later WHERE later.status IN ('PENDING', 'RETRY_WAIT') AND " +
    holds_back("h", "later") + ") "
    "ORDER BY successors DESC, h.occurred_at LIMIT 20";

inline constexpr const char* kStatusReview = R"SQL(
SELECT event_type, coalesce(last_error_code, '-'), count(*) FROM event_publication
WHERE status = 'REVIEW_REQUIRED' GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
)SQL";

// Counts per (event type, status) of one company: the unfinished statuses from the claim's
// partial indexes (as large as the backlog), the finished ones from the company's rows
// (about 350 ms for a million; the overview cache bounds how often).
inline constexpr const char* kOverviewByType = R"SQL(
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status IN ('COMPLETED', 'DISCARDED') GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status IN ('PENDING', 'RETRY_WAIT') GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status = 'PROCESSING' GROUP BY event_type, status
UNION ALL
SELECT event_type, status, count(*) FROM event_publication
WHERE company_id = $1 AND status = 'REVIEW_REQUIRED' GROUP BY event_type, status
ORDER BY 1, 2
)SQL";

// The last 60 minutes, oldest first, the current (partial) minute last. completed: events
// that completed in the minute. failed: the schema keeps no row per attempt, so this is
// the events now waiting for a retry (RETRY_WAIT) or a person (REVIEW_REQUIRED) whose last
// attempt failed in the minute; an event that failed and was retried again is counted at
// its latest failure only. Each status is read from its own partial index.
inline constexpr const char* kOverviewPerMinute = R"SQL(
WITH minutes AS (
    SELECT m FROM generate_series(date_trunc('minute', now()) - interval '59 minutes', date_trunc('minute', now()),
                                  interval '1 minute') AS m
), completed AS (
    SELECT date_trunc('minute', completed_at) AS m, count(*) AS n FROM event_publication
    WHERE status = 'COMPLETED' AND company_id = $1 AND completed_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
), failed AS (
    SELECT m, sum(n) AS n FROM (
        SELECT date_trunc('minute', updated_at) AS m, count(*) AS n FROM event_publication
        WHERE status = 'RETRY_WAIT' AND company_id = $1 AND updated_at >= date_trunc('minute', now()) - interval '59 minutes'
        GROUP BY 1
        UNION ALL
        SELECT date_trunc('minute', updated_at), count(*) FROM event_publication
        WHERE status = 'REVIEW_REQUIRED' AND company_id = $1 AND updated_at >= date_trunc('minute', now()) - interval '59 minutes'
        GROUP BY 1) f
    GROUP BY m
)
SELECT to_char(minutes.m, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), coalesce(c.n, 0), coalesce(f.n, 0)
FROM minutes LEFT JOIN completed c ON c.m = minutes.m LEFT JOIN failed f ON f.m = minutes.m
ORDER BY minutes.m
)SQL";

// Read from event_publication_review_idx (company_id, updated_at) WHERE REVIEW_REQUIRED.
inline constexpr const char* kReviewGroups = R"SQL(
SELECT event_type, last_error_code, count(*),
       to_char(min(occurred_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(max(occurred_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM event_publication WHERE status = 'REVIEW_REQUIRED' AND company_id = $1
GROUP BY event_type, last_error_code
ORDER BY count(*) DESC, event_type, last_error_code NULLS FIRST
)SQL";

}  // namespace outbox::db::event_sql
