-- One claim of up to :batch events and one finish of all of them, each its own statement
-- and transaction, with the text of host/src/db/event_sql.hpp (kClaim, kFinish;
-- no consumption rows: a single handler's success is the COMPLETED status).
WITH due AS (
    SELECT event_id FROM event_publication
    WHERE status IN ('PENDING', 'RETRY_WAIT') AND (status = 'PENDING' OR last_error_code IS DISTINCT FROM 'WORKER_LOST')
      AND (aggregate_seq IS NULL OR NOT EXISTS (SELECT 1 FROM event_publication earlier WHERE earlier.company_id = event_publication.company_id AND earlier.aggregate_key = event_publication.aggregate_key AND earlier.aggregate_seq < event_publication.aggregate_seq AND earlier.aggregate_seq IS NOT NULL AND earlier.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')))
      AND next_attempt_at <= now() AND event_type = ANY ('{BenchNoop}'::text[])
    ORDER BY next_attempt_at
    LIMIT :batch
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE event_publication e
    SET status = 'PROCESSING', attempt_count = e.attempt_count + 1, lease_owner = 'bench-1',
        lease_incarnation = nullif('0123456789abcdef', ''), lease_token = gen_random_uuid(), lease_expires_at = now() + 300000::bigint * interval '1 millisecond',
        version = e.version + 1, updated_at = now()
    WHERE e.event_id = ANY (ARRAY(SELECT event_id FROM due))
    RETURNING e.event_id, e.event_type, e.company_id, e.aggregate_key, e.payload, e.attempt_count,
              e.lease_token, e.occurred_at, e.version
), rows AS (
    SELECT c.event_id, c.lease_token, length(c.payload::text) AS payload_len,
           CASE WHEN c.version <= 2 AND c.attempt_count <= 1 THEN NULL
                ELSE (SELECT string_agg(handler_name, ',') FROM event_consumption ec WHERE ec.event_id = c.event_id) END AS consumed
    FROM claimed c
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
    WHERE e.event_id = ANY(:ids::uuid[]) AND e.event_id = i.event_id AND e.lease_token = i.lease_token
    RETURNING e.event_id, i.lease_token
), consumed AS (
    INSERT INTO event_consumption (event_id, handler_name)
    SELECT c.event_id, c.handler_name FROM ROWS FROM (pg_catalog.unnest('{}'::uuid[]), pg_catalog.unnest('{}'::text[])) AS c(event_id, handler_name)
    WHERE c.event_id IN (SELECT event_id FROM done)
    ON CONFLICT DO NOTHING
)
SELECT count(*) FROM done;
