-- (e) As (d), leaner history: the outcome row has no B-tree (a BRIN on event_id finds it:
-- ids are uuid v7, so each partition is nearly in id order; only the queue's DELETE ...
-- RETURNING writes an outcome, so at most one per event without a unique index), and the
-- console's company list indexes (company_id, event_id) (uuid v7 orders by time).
-- (d) itself: a queue whose claim is a HOT update: no index of event_queue names a
-- column the claim changes (status is not stored: PROCESSING = a lease token is set,
-- REVIEW_REQUIRED = parked, RETRY_WAIT = attempted before; the due index holds every
-- unparked queued row by next_attempt_at and the claim skips leased rows by a heap check),
-- and the table leaves room on each page for the new row versions (fillfactor 30). A row in
-- the queue is unfinished by definition, so the ordering check is "an earlier row of the
-- aggregate is still queued".
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
CREATE INDEX event_store_company_list_idx ON event_store (company_id, event_id DESC);
SELECT lay_make_partitions('event_store', now() - interval '1 hour', now() + interval '3 hours', interval '1 hour');

CREATE TABLE event_queue (
    event_id uuid PRIMARY KEY,
    company_id text NOT NULL,
    event_type text NOT NULL,
    aggregate_key text,
    aggregate_seq bigint,
    parked boolean NOT NULL DEFAULT false,
    attempt_count int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_owner text,
    lease_incarnation text,
    lease_token uuid,
    lease_expires_at timestamptz,
    last_error_code text,
    version bigint NOT NULL DEFAULT 1,
    updated_at timestamptz NOT NULL DEFAULT now(),
    parked_at timestamptz
) WITH (fillfactor = 30);
CREATE INDEX event_queue_due_idx ON event_queue (next_attempt_at) WHERE NOT parked;
CREATE INDEX event_queue_aggregate_idx ON event_queue (company_id, aggregate_key, aggregate_seq) WHERE aggregate_seq IS NOT NULL;
-- Not on updated_at, which every claim changes (that alone would make claims non-HOT).
CREATE INDEX event_queue_review_idx ON event_queue (company_id, parked_at) WHERE parked;

CREATE TABLE event_outcome (
    event_id uuid NOT NULL,
    status text NOT NULL,
    attempt_count int NOT NULL,
    last_error_code text,
    version bigint NOT NULL,
    completed_at timestamptz NOT NULL
) PARTITION BY RANGE (event_id);
CREATE INDEX event_outcome_id_brin ON event_outcome USING brin (event_id) WITH (pages_per_range = 8);
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
