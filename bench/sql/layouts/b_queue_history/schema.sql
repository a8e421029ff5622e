-- (b) event_publication stays the queue of unfinished events (same name and columns, so
-- the claim and finish SQL of 0.2.0 hosts keeps working on it) with only the indexes that
-- claims, leases, ordering and review need; a finished event is DELETEd from it and
-- INSERTed into event_history, append-only and partitioned by event_id range (uuid v7:
-- by publication time), dropped whole by retention.
DROP INDEX event_publication_company_list_idx;   -- the console lists the history (and the small queue)
DROP INDEX event_publication_completed_idx;      -- nothing finished stays in the queue
DROP INDEX event_publication_discarded_idx;
DROP TRIGGER event_publication_delete_consumption ON event_publication;  -- consumption rows follow the history's partitions

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
CREATE INDEX event_history_company_list_idx ON event_history (company_id, occurred_at DESC, event_id DESC);
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
