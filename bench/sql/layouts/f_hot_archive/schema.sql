-- (f) event_publication stays the queue (same name and columns: 0.2.0 hosts' statements
-- still parse and run against it) and a finished event moves to event_history, as in (b);
-- and the claim is a HOT update, as in (d): no index of the queue names a column the claim
-- or a heartbeat changes (status, lease_*, attempt_count, version, updated_at), so the
-- status partial indexes give way to one due index on next_attempt_at that also holds the
-- leased rows (the claim skips them on the heap), and a REVIEW_REQUIRED event is parked at
-- next_attempt_at = 'infinity' (out of every claim's way; its own partial index lists them).
-- fillfactor 30 leaves room on each page for the claim's new row version.
DROP INDEX event_publication_company_list_idx;
DROP INDEX event_publication_completed_idx;
DROP INDEX event_publication_discarded_idx;
DROP INDEX event_publication_due_idx;
DROP INDEX event_publication_lease_idx;
DROP INDEX event_publication_review_idx;
DROP INDEX event_publication_suspect_idx;
DROP INDEX event_publication_aggregate_idx;
DROP INDEX event_publication_dedup_idx;   -- dedup over the retention window: lay_dedup
DROP TRIGGER event_publication_delete_consumption ON event_publication;
ALTER TABLE event_publication SET (fillfactor = 30);
CREATE INDEX event_publication_due_idx ON event_publication (next_attempt_at);
CREATE INDEX event_publication_aggregate_idx ON event_publication (company_id, aggregate_key, aggregate_seq)
    WHERE aggregate_seq IS NOT NULL;
CREATE INDEX event_publication_parked_idx ON event_publication (company_id, event_id)
    WHERE next_attempt_at = 'infinity';
CREATE TABLE event_history (
    event_id uuid NOT NULL,
    company_id text NOT NULL,
    event_type text NOT NULL,
    aggregate_key text,
    aggregate_seq bigint,
    dedup_key text,
    payload jsonb NOT NULL,
    status text NOT NULL,
    attempt_count int NOT NULL,
    last_error_code text,
    version bigint NOT NULL,
    occurred_at timestamptz NOT NULL,
    deliver_after timestamptz,
    completed_at timestamptz NOT NULL,
    PRIMARY KEY (event_id)
) PARTITION BY RANGE (event_id);
CREATE INDEX event_history_company_list_idx ON event_history (company_id, event_id DESC);
SELECT lay_make_partitions('event_history', now() - interval '1 hour', now() + interval '3 hours', interval '1 hour');

CREATE FUNCTION lay_publish(
    p_company_id text, p_event_type text, p_payload jsonb, p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL, deliver_after timestamptz DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    v_id uuid;
    v_bad_key text;
BEGIN
-- @CHECKS@
    v_id := outbox_uuid_v7();
    IF p_dedup_key IS NOT NULL THEN
        INSERT INTO lay_dedup (company_id, event_type, dedup_key, event_id)
            VALUES (p_company_id, p_event_type, p_dedup_key, v_id) ON CONFLICT DO NOTHING;
        IF NOT FOUND THEN
            SELECT event_id INTO v_id FROM lay_dedup
                WHERE company_id = p_company_id AND event_type = p_event_type AND dedup_key = p_dedup_key;
            RETURN v_id;
        END IF;
    END IF;
    INSERT INTO event_publication (event_id, company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload,
                                   deliver_after, next_attempt_at)
        VALUES (v_id, p_company_id, p_event_type, p_aggregate_key,
                outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_dedup_key, p_payload,
                lay_publish.deliver_after, greatest(lay_publish.deliver_after, now()));
    PERFORM pg_notify('outboxd_events', p_event_type);
    RETURN v_id;
END
$$;
