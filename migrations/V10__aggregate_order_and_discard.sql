-- online: yes
-- Per-aggregate ordering and the DISCARDED status.
--
-- Online: the ALTER TABLE statements take an ACCESS EXCLUSIVE lock for an instant (a
-- nullable column without default, NOT VALID checks: no table scan); the partial indexes
-- the claim and retention use are built CONCURRENTLY by V13. lock_timeout keeps the
-- migration from queueing behind a long transaction while claims queue behind it; it fails
-- instead and can be re-run.
-- Hosts of the previous release keep running: they never produce DISCARDED, never read
-- aggregate_seq and claim without the ordering rule, so ordering holds once every host
-- runs this release. Their retention leaves DISCARDED rows to the new hosts.
SET LOCAL lock_timeout = '5s';

-- The position of an event in its aggregate: allocated by outbox_publish() under the
-- aggregate's row lock, so it follows the commit order of the publishing transactions.
ALTER TABLE event_publication ADD COLUMN aggregate_seq bigint NULL;

-- One row per (company_id, aggregate_key) ever published with a key: the last sequence
-- number handed out. A publishing transaction holds its row locked until it ends, so the
-- next publisher of the same aggregate gets its number only after that commit (or gets
-- the same number after a rollback).
CREATE TABLE outbox_aggregate (
    company_id    text   NOT NULL,
    aggregate_key text   NOT NULL,
    last_seq      bigint NOT NULL,
    PRIMARY KEY (company_id, aggregate_key)
);

-- NULL for an event without a key (no lock, no row).
CREATE FUNCTION outbox_next_aggregate_seq(p_company_id text, p_aggregate_key text)
RETURNS bigint LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_seq bigint;
BEGIN
    IF p_aggregate_key IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox_aggregate AS a (company_id, aggregate_key, last_seq)
        VALUES (p_company_id, p_aggregate_key, 1)
        ON CONFLICT (company_id, aggregate_key) DO UPDATE SET last_seq = a.last_seq + 1
        RETURNING a.last_seq INTO v_seq;
    RETURN v_seq;
END
$$;

-- DISCARDED: an operator gave up on a REVIEW_REQUIRED event; terminal, and finished at
-- completed_at like COMPLETED (retention deletes both). The new checks are weaker than the
-- ones they replace, so every existing row satisfies them: NOT VALID skips a scan under
-- ACCESS EXCLUSIVE, and both are enforced on every write from now on. VALIDATE CONSTRAINT
-- can be run later at any time (it does not block writes).
-- The replacements take the old names, so errors keep naming the same constraints.
ALTER TABLE event_publication ADD CONSTRAINT event_publication_status_v10_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'COMPLETED', 'REVIEW_REQUIRED', 'DISCARDED')) NOT VALID;
ALTER TABLE event_publication DROP CONSTRAINT event_publication_status_check;
ALTER TABLE event_publication RENAME CONSTRAINT event_publication_status_v10_check TO event_publication_status_check;
ALTER TABLE event_publication ADD CONSTRAINT event_publication_completed_v10_check
    CHECK ((status IN ('COMPLETED', 'DISCARDED')) = (completed_at IS NOT NULL)) NOT VALID;
ALTER TABLE event_publication DROP CONSTRAINT event_publication_completed_check;
ALTER TABLE event_publication RENAME CONSTRAINT event_publication_completed_v10_check
    TO event_publication_completed_check;

-- The immutable record of an operator's discard, and its Idempotency-Key (the same
-- semantics as outbox_manual_retry: one key per request and company).
CREATE TABLE outbox_discard (
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
CREATE INDEX outbox_discard_event_idx ON outbox_discard (event_id);
CREATE TRIGGER outbox_discard_immutable BEFORE UPDATE OR DELETE ON outbox_discard
    FOR EACH ROW EXECUTE FUNCTION outbox_reject_modification();
CREATE TRIGGER outbox_discard_no_truncate BEFORE TRUNCATE ON outbox_discard
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_reject_modification();

-- outbox_publish() as in V8 (SECURITY DEFINER, aggregate_key screened), with one change:
-- each INSERT takes the event's aggregate_seq from outbox_next_aggregate_seq(). CREATE OR
-- REPLACE keeps V8's grants. The C++ publisher calls this function too.
CREATE OR REPLACE FUNCTION outbox_publish(
    p_company_id text,
    p_event_type text,
    p_payload jsonb,
    p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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
    PERFORM outbox_check_free_text(p_aggregate_key, 'outbox_publish: aggregate_key');
    IF p_dedup_key IS NOT NULL AND (length(p_dedup_key) = 0 OR length(p_dedup_key) > 200) THEN
        RAISE EXCEPTION 'outbox_publish: dedup_key must be 1 to 200 characters' USING ERRCODE = '22023';
    END IF;

    IF p_dedup_key IS NULL THEN
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_payload)
            RETURNING event_id INTO v_id;
    ELSE
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_dedup_key, p_payload)
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
