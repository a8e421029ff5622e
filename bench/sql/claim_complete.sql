-- The raw SQL ceiling for pgbench (bench/run.sh): one cycle claims up to :batch due events
-- with FOR UPDATE SKIP LOCKED, exactly as a worker leases them (new lease token, attempt
-- counted), then completes them with a fenced UPDATE, each statement its own transaction.
-- No handler, no consumption rows: what the table alone allows.
WITH due AS (
    SELECT event_id FROM event_publication
    WHERE status IN ('PENDING', 'RETRY_WAIT') AND next_attempt_at <= now() AND event_type = 'BenchNoop'
    ORDER BY next_attempt_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE event_publication e
    SET status = 'PROCESSING', attempt_count = e.attempt_count + 1, lease_owner = 'pgbench',
        lease_token = gen_random_uuid(), lease_expires_at = now() + interval '5 minutes',
        version = e.version + 1, updated_at = now()
    FROM due WHERE e.event_id = due.event_id
    RETURNING e.event_id, e.lease_token
)
SELECT coalesce(array_agg(event_id)::text, '{}') AS ids, coalesce(array_agg(lease_token)::text, '{}') AS tokens
FROM claimed
\gset
UPDATE event_publication e
SET status = 'COMPLETED', completed_at = now(), lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,
    version = e.version + 1, updated_at = now()
FROM unnest(:ids::uuid[], :tokens::uuid[]) AS t(event_id, lease_token)
WHERE e.event_id = t.event_id AND e.status = 'PROCESSING' AND e.lease_token = t.lease_token;
