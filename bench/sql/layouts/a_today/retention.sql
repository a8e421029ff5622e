-- One batch of host/src/lease/retention.cpp (retention 0: every COMPLETED event is old
-- enough), in its own transaction as the host runs it.
BEGIN;
SELECT pg_try_advisory_xact_lock(7325);
SET LOCAL statement_timeout = '30s';
DELETE FROM event_publication
WHERE event_id IN (
    SELECT event_id FROM event_publication
    WHERE status = 'COMPLETED'
      AND completed_at < now() - 0::bigint * interval '1 millisecond'
    ORDER BY completed_at
    LIMIT 1000
    FOR UPDATE SKIP LOCKED)
  AND status = 'COMPLETED';
COMMIT;
