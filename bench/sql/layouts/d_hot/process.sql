-- As (c); the claim changes no indexed column (HOT), and filters leased rows on the heap.
WITH due AS (
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
        lease_incarnation = nullif('0123456789abcdef', ''), lease_token = gen_random_uuid(), lease_expires_at = now() + 300000::bigint * interval '1 millisecond',
        version = e.version + 1, updated_at = now()
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM due))
    RETURNING e.event_id, e.attempt_count, e.lease_token, e.version
), rows AS (
    SELECT c.event_id, c.lease_token, length(s.payload::text) AS payload_len, s.company_id, s.occurred_at
    FROM claimed c JOIN event_store s ON s.event_id = c.event_id
)
SELECT coalesce(array_agg(event_id)::text, '{}') AS ids, coalesce(array_agg(lease_token)::text, '{}') AS tokens,
       coalesce(array_agg('COMPLETED'::text)::text, '{}') AS statuses, coalesce(array_agg(0::bigint)::text, '{}') AS delays,
       coalesce(array_agg(NULL::text)::text, '{}') AS codes, sum(payload_len) AS bytes
FROM rows
\gset
WITH input AS (
    SELECT * FROM ROWS FROM (pg_catalog.unnest(:ids::uuid[]), pg_catalog.unnest(:tokens::uuid[]), pg_catalog.unnest(:statuses::text[]),
                             pg_catalog.unnest(:delays::bigint[]), pg_catalog.unnest(:codes::text[]))
        AS t(event_id, lease_token, status, delay_ms, error_code)
), finished AS (
    DELETE FROM event_queue e
    USING input i
    WHERE e.event_id = ANY(:ids::uuid[]) AND e.event_id = i.event_id AND e.lease_token = i.lease_token
      AND i.status IN ('COMPLETED', 'DISCARDED')
    RETURNING e.event_id, e.attempt_count, e.last_error_code, e.version, i.status AS new_status, i.error_code AS new_code
), outcome AS (
    INSERT INTO event_outcome (event_id, status, attempt_count, last_error_code, version, completed_at)
    SELECT event_id, new_status, attempt_count, coalesce(new_code, last_error_code), version + 1, now() FROM finished
), retried AS (
    UPDATE event_queue e
    SET parked = i.status = 'REVIEW_REQUIRED', parked_at = CASE WHEN i.status = 'REVIEW_REQUIRED' THEN now() END,
        next_attempt_at = CASE WHEN i.status = 'RETRY_WAIT' THEN now() + i.delay_ms * interval '1 millisecond' ELSE e.next_attempt_at END,
        last_error_code = coalesce(i.error_code, e.last_error_code),
        lease_owner = NULL, lease_incarnation = NULL, lease_token = NULL, lease_expires_at = NULL,
        version = e.version + 1, updated_at = now()
    FROM input i
    WHERE e.event_id = ANY(:ids::uuid[]) AND e.event_id = i.event_id AND e.lease_token = i.lease_token
      AND i.status NOT IN ('COMPLETED', 'DISCARDED')
    RETURNING e.event_id
)
SELECT (SELECT count(*) FROM finished) + (SELECT count(*) FROM retried);
