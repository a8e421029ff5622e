-- outboxd schema, version 1. Immutable once released: change the schema in a new file.

CREATE TABLE event_publication (
    event_id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    company_id       text        NOT NULL CHECK (length(company_id) BETWEEN 1 AND 100),
    event_type       text        NOT NULL CHECK (event_type ~ '^[A-Z][A-Za-z0-9]{0,99}$'),
    aggregate_key    text        NULL CHECK (length(aggregate_key) <= 200),
    dedup_key        text        NULL CHECK (length(dedup_key) <= 200),
    payload          jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    status           text        NOT NULL DEFAULT 'PENDING'
                     CHECK (status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'COMPLETED', 'REVIEW_REQUIRED')),
    attempt_count    integer     NOT NULL DEFAULT 0 CHECK (attempt_count >= 0),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    lease_owner      text        NULL,
    lease_token      uuid        NULL,
    lease_expires_at timestamptz NULL,
    last_error_code  text        NULL CHECK (last_error_code ~ '^[A-Z][A-Z0-9_]{0,63}$'),
    version          bigint      NOT NULL DEFAULT 1,
    occurred_at      timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz NULL,
    -- A PROCESSING row always has a lease; no other row has one.
    CONSTRAINT event_publication_lease_check CHECK (
        (status = 'PROCESSING') = (lease_token IS NOT NULL AND lease_owner IS NOT NULL AND lease_expires_at IS NOT NULL)),
    CONSTRAINT event_publication_completed_check CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL))
);

-- The claim reads only due rows: its cost does not grow with COMPLETED or REVIEW_REQUIRED rows.
CREATE INDEX event_publication_due_idx ON event_publication (next_attempt_at)
    WHERE status IN ('PENDING', 'RETRY_WAIT');
-- Lease recovery reads only PROCESSING rows.
CREATE INDEX event_publication_lease_idx ON event_publication (lease_expires_at)
    WHERE status = 'PROCESSING';
-- Operators list what needs review; retention walks old COMPLETED rows.
CREATE INDEX event_publication_review_idx ON event_publication (company_id, updated_at)
    WHERE status = 'REVIEW_REQUIRED';
CREATE INDEX event_publication_completed_idx ON event_publication (completed_at)
    WHERE status = 'COMPLETED';
CREATE UNIQUE INDEX event_publication_dedup_idx ON event_publication (company_id, event_type, dedup_key)
    WHERE dedup_key IS NOT NULL;

CREATE TABLE event_consumption (
    event_id     uuid        NOT NULL REFERENCES event_publication (event_id) ON DELETE CASCADE,
    handler_name text        NOT NULL CHECK (length(handler_name) BETWEEN 1 AND 100),
    consumed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event_id, handler_name)
);

CREATE TABLE outbox_manual_retry (
    id                     bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id               uuid        NOT NULL,
    company_id             text        NOT NULL,
    actor                  text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason                 text        NOT NULL CHECK (char_length(reason) BETWEEN 10 AND 300),
    idempotency_key_hash   text        NOT NULL,
    request_hash           text        NOT NULL,
    previous_attempt_count integer     NOT NULL,
    previous_status        text        NOT NULL,
    previous_version       bigint      NOT NULL,
    new_version            bigint      NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    UNIQUE (company_id, idempotency_key_hash)
);
CREATE INDEX outbox_manual_retry_event_idx ON outbox_manual_retry (event_id);

CREATE TABLE audit_event (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    action      text        NOT NULL,
    company_id  text        NULL,
    target_id   text        NULL,
    detail      jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE FUNCTION outbox_reject_modification() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;

CREATE TRIGGER outbox_manual_retry_immutable BEFORE UPDATE OR DELETE ON outbox_manual_retry
    FOR EACH ROW EXECUTE FUNCTION outbox_reject_modification();
CREATE TRIGGER outbox_manual_retry_no_truncate BEFORE TRUNCATE ON outbox_manual_retry
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_reject_modification();
CREATE TRIGGER audit_event_immutable BEFORE UPDATE OR DELETE ON audit_event
    FOR EACH ROW EXECUTE FUNCTION outbox_reject_modification();
CREATE TRIGGER audit_event_no_truncate BEFORE TRUNCATE ON audit_event
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_reject_modification();

-- The publishing entry point for any language, called inside the publisher's transaction.
-- Validates the payload shape (a flat object of scalars, at most 8192 bytes), inserts the
-- row and wakes the workers; NOTIFY is delivered only if the transaction commits. With a
-- dedup_key, a repeated (company_id, event_type, dedup_key) inserts nothing and returns
-- the first event's id.
CREATE FUNCTION outbox_publish(
    p_company_id text,
    p_event_type text,
    p_payload jsonb,
    p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql AS $$
DECLARE
    v_id uuid;
    v_bad_key text;
BEGIN
    IF p_company_id IS NULL OR length(p_company_id) = 0 OR length(p_company_id) > 100 THEN
        RAISE EXCEPTION 'outbox_publish: company_id must be 1 to 100 characters' USING ERRCODE = '22023';
    END IF;
    IF p_event_type IS NULL OR p_event_type !~ '^[A-Z][A-Za-z0-9]{0,99}$' THEN
        RAISE EXCEPTION 'outbox_publish: event_type must be PascalCase letters and digits, e.g. WebsiteRegistered'
            USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL OR jsonb_typeof(p_payload) <> 'object' THEN
        RAISE EXCEPTION 'outbox_publish: payload must be a JSON object' USING ERRCODE = '22023';
    END IF;
    SELECT key INTO v_bad_key FROM jsonb_each(p_payload)
        WHERE jsonb_typeof(value) IN ('object', 'array') LIMIT 1;
    IF v_bad_key IS NOT NULL THEN
        RAISE EXCEPTION 'outbox_publish: payload field "%" is nested; only scalar values are allowed', v_bad_key
            USING ERRCODE = '22023';
    END IF;
    IF octet_length(p_payload::text) > 8192 THEN
        RAISE EXCEPTION 'outbox_publish: payload is larger than 8192 bytes' USING ERRCODE = '22023';
    END IF;
    IF p_aggregate_key IS NOT NULL AND (length(p_aggregate_key) = 0 OR length(p_aggregate_key) > 200) THEN
        RAISE EXCEPTION 'outbox_publish: aggregate_key must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;
    IF p_dedup_key IS NOT NULL AND (length(p_dedup_key) = 0 OR length(p_dedup_key) > 200) THEN
        RAISE EXCEPTION 'outbox_publish: dedup_key must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;

    IF p_dedup_key IS NULL THEN
        INSERT INTO event_publication (company_id, event_type, aggregate_key, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key, p_payload)
            RETURNING event_id INTO v_id;
    ELSE
        INSERT INTO event_publication (company_id, event_type, aggregate_key, dedup_key, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key, p_dedup_key, p_payload)
            ON CONFLICT (company_id, event_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
            RETURNING event_id INTO v_id;
        IF v_id IS NULL THEN
            SELECT event_id INTO v_id FROM event_publication
                WHERE company_id = p_company_id AND event_type = p_event_type AND dedup_key = p_dedup_key;
            RETURN v_id;
        END IF;
    END IF;
    -- Identical notifications in one transaction are folded into one by PostgreSQL.
    PERFORM pg_notify('outboxd_events', p_event_type);
    RETURN v_id;
END
$$;
