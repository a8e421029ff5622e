-- As e_lean, with leaner statements: the claim gives the whole batch one lease token (a
-- reclaim still gets a new one, so fencing holds per batch) and returns rows without
-- building per-event arrays; the finish of a batch that all COMPLETED sends one id array and
-- the token (the common case; mixed outcomes keep e_lean's general statement).
WITH batch AS (
    SELECT gen_random_uuid() AS token
), due AS (
    SELECT event_id FROM event_queue q
    WHERE NOT parked AND lease_token IS NULL AND (attempt_count = 0 OR last_error_code IS DISTINCT FROM 'WORKER_LOST')
      AND (aggregate_seq IS NULL OR NOT EXISTS (SELECT 1 FROM event_queue earlier WHERE earlier.company_id = q.company_id AND earlier.aggregate_key = q.aggregate_key AND earlier.aggregate_seq < q.aggregate_seq AND earlier.aggregate_seq IS NOT NULL))
      AND next_attempt_at <= now() AND event_type = ANY ('{BenchNoop}'::text[])
    ORDER BY next_attempt_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE event_queue e
    SET attempt_count = e.attempt_count + 1, lease_owner = 'bench-1',
        lease_incarnation = nullif('0123456789abcdef', ''), lease_token = (SELECT token FROM batch),
        lease_expires_at = now() + 300000::bigint * interval '1 millisecond',
        version = e.version + 1, updated_at = now()
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM due))
    RETURNING e.event_id, e.attempt_count, e.lease_token, e.version
)
SELECT coalesce(array_agg(c.event_id)::text, '{}') AS ids, (SELECT token FROM batch)::text AS token,
       sum(length(s.payload::text)) AS bytes
FROM claimed c JOIN event_store s ON s.event_id = c.event_id
\gset
WITH finished AS (
    DELETE FROM event_queue e
    WHERE e.event_id = ANY(:ids::uuid[]) AND e.lease_token = :token::uuid
    RETURNING e.event_id, e.attempt_count, e.last_error_code, e.version
)
INSERT INTO event_outcome (event_id, status, attempt_count, last_error_code, version, completed_at)
SELECT event_id, 'COMPLETED', attempt_count, last_error_code, version + 1, now() FROM finished;
