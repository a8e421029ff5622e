-- (c) The payload is written once, into event_store (immutable, partitioned by event_id
-- range); a narrow event_queue row (no payload) is claimed by UPDATE and DELETEd at the
-- finish; the final state is a narrow event_outcome row (partitioned like event_store).
-- Statuses, fencing and ordering live in the queue row; history = store + outcome.
CREATE TABLE event_store (
    event_id uuid NOT NULL,
    company_id text NOT NULL,
    event_type text NOT NULL,
    aggregate_key text,
    aggregate_seq bigint,
    dedup_key text,
    payload jsonb NOT NULL,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    deliver_after timestamptz,
    PRIMARY KEY (event_id)
) PARTITION BY RANGE (event_id);
CREATE INDEX event_store_company_list_idx ON event_store (company_id, occurred_at DESC, event_id DESC);
SELECT lay_make_partitions('event_store', now() - interval '1 hour', now() + interval '3 hours', interval '1 hour');

CREATE TABLE event_queue (
    event_id uuid PRIMARY KEY,
    company_id text NOT NULL,
    event_type text NOT NULL,
    aggregate_key text,
    aggregate_seq bigint,
    status text NOT NULL DEFAULT 'PENDING',
    attempt_count int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_incarnation text,
    lease_token uuid,
    lease_expires_at timestamptz,
    last_error_code text,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_queue_due_idx ON event_queue (next_attempt_at) WHERE status IN ('PENDING', 'RETRY_WAIT');
CREATE INDEX event_queue_lease_idx ON event_queue (lease_expires_at) WHERE status = 'PROCESSING';
CREATE INDEX event_queue_aggregate_idx ON event_queue (company_id, aggregate_key, aggregate_seq) WHERE aggregate_seq IS NOT NULL;
CREATE INDEX event_queue_review_idx ON event_queue (company_id, updated_at) WHERE status = 'REVIEW_REQUIRED';
CREATE INDEX event_queue_suspect_idx ON event_queue (next_attempt_at) WHERE status = 'RETRY_WAIT' AND last_error_code = 'WORKER_LOST';

CREATE TABLE event_outcome (
    event_id uuid NOT NULL,
    status text NOT NULL,
    attempt_count int NOT NULL,
    last_error_code text,
    version bigint NOT NULL,
    completed_at timestamptz NOT NULL,
    PRIMARY KEY (event_id)
) PARTITION BY RANGE (event_id);
SELECT lay_make_partitions('event_outcome', now() - interval '1 hour', now() + interval '3 hours', interval '1 hour');

CREATE FUNCTION lay_publish(
    p_company_id text, p_event_type text, p_payload jsonb, p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL, deliver_after timestamptz DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    v_id uuid;
    v_bad_key text;
    v_seq bigint;
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
    v_seq := outbox_next_aggregate_seq(p_company_id, p_aggregate_key);
    INSERT INTO event_store (event_id, company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload, deliver_after)
        VALUES (v_id, p_company_id, p_event_type, p_aggregate_key, v_seq, p_dedup_key, p_payload, lay_publish.deliver_after);
    INSERT INTO event_queue (event_id, company_id, event_type, aggregate_key, aggregate_seq, next_attempt_at)
        VALUES (v_id, p_company_id, p_event_type, p_aggregate_key, v_seq, greatest(lay_publish.deliver_after, now()));
    PERFORM pg_notify('outboxd_events', p_event_type);
    RETURN v_id;
END
$$;
