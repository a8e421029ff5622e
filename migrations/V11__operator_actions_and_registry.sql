-- online: yes
-- Operator actions at fleet scale and the event-type registry (issue 13): bulk re-drives,
-- handlers paused fleet-wide, and one publishing contract for every language.
--
-- Online (expand-only): new tables and new functions only, plus outbox_publish() replaced
-- by a compatible version (same signature and results) that also calls
-- outbox_check_registered_payload(). With no event type registered and
-- outbox.require_registered_types off it accepts exactly what it accepted before. Hosts of
-- the previous release never read the new tables: they keep working, but do not honour a
-- paused handler until they are upgraded.

-- One row per bulk re-drive request: its Idempotency-Key (per company; NULL company = a
-- CLI re-drive over every company), the request it was used for and the events it
-- re-drove, so the same key with the same request answers the first result again.
-- Each re-driven event also gets its own outbox_manual_retry and audit_event row.
CREATE TABLE outbox_bulk_retry (
    id                   bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    company_id           text        NULL,
    actor                text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason               text        NOT NULL CHECK (char_length(reason) BETWEEN 10 AND 300),
    idempotency_key_hash text        NOT NULL,
    request_hash         text        NOT NULL,
    filter               jsonb       NOT NULL CHECK (jsonb_typeof(filter) = 'object'),
    event_ids            uuid[]      NOT NULL,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX outbox_bulk_retry_key_idx ON outbox_bulk_retry (coalesce(company_id, ''), idempotency_key_hash);
CREATE TRIGGER outbox_bulk_retry_immutable BEFORE UPDATE OR DELETE ON outbox_bulk_retry
    FOR EACH ROW EXECUTE FUNCTION outbox_reject_modification();
CREATE TRIGGER outbox_bulk_retry_no_truncate BEFORE TRUNCATE ON outbox_bulk_retry
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_reject_modification();

-- Handlers paused fleet-wide: while a row exists, no host claims an event of a type this
-- handler supports, and no host starts a call of it. Pause and resume NOTIFY
-- 'outboxd_handlers' so every host re-reads this table at once; hosts also re-read it at
-- every poll interval.
CREATE TABLE outbox_handler_pause (
    handler_name text        PRIMARY KEY CHECK (handler_name ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
    paused_at    timestamptz NOT NULL DEFAULT now(),
    paused_by    text        NOT NULL CHECK (length(paused_by) BETWEEN 1 AND 200)
);

-- The event-type registry, applied by `outboxd event-types apply FILE`. fields is
-- {"<name>": {"type": "string|integer|number|boolean", "max_length": N (strings only),
-- "identifier": bool}}; version goes up by one at every change of a type's fields.
CREATE TABLE outbox_event_type (
    event_type text        PRIMARY KEY CHECK (event_type ~ '^[A-Z][A-Za-z0-9]{0,99}$'),
    fields     jsonb       NOT NULL CHECK (jsonb_typeof(fields) = 'object'),
    version    integer     NOT NULL DEFAULT 1 CHECK (version >= 1),
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text        NOT NULL CHECK (length(updated_by) BETWEEN 1 AND 200)
);

-- Settings that functions called by applications need (applications do not read outboxd's
-- configuration). Written by `outboxd migrate` and `outboxd event-types apply` from their
-- configuration: require_registered_types (outbox.require_registered_types).
CREATE TABLE outbox_setting (
    name       text        PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_]{0,99}$'),
    value      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The registry's rules for one payload, the same as the C++ SafePayload applies to the
-- field kinds a registered type maps to (see outbox/sdk/registry.hpp):
--   string          -> SafePayload String: 1 to max_length bytes (default 256); no e-mail
--                      address, no JWT, no run of 9 or more digits (phone separators
--                      " +-.()" do not break a run)
--   string + identifier -> SafePayload Identifier: 1 to max_length bytes of [A-Za-z0-9_.:-];
--                      no JWT, not phone-shaped (only digits and separators, at least one
--                      separator, 9 or more digits), no run of 13 or more digits
--   integer         -> a JSON integer (no fraction or exponent) within signed 64 bits
--   number          -> a finite JSON number
--   boolean         -> true or false
-- null is never accepted. Fields are optional; undeclared fields are refused. An
-- unregistered type passes unless the require_registered_types setting is true.
-- Errors are SQLSTATE 22023 and name the field and the rule, never the value.
CREATE FUNCTION outbox_check_registered_payload(p_event_type text, p_payload jsonb)
RETURNS void LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
DECLARE
    v_fields   jsonb;
    v_key      text;
    v_value    jsonb;
    v_spec     jsonb;
    v_type     text;
    v_text     text;
    v_max      integer;
    v_required boolean;
BEGIN
    SELECT fields INTO v_fields FROM outbox_event_type WHERE event_type = p_event_type;
    IF NOT FOUND THEN
        SELECT value = 'true'::jsonb INTO v_required FROM outbox_setting WHERE name = 'require_registered_types';
        IF v_required THEN
            RAISE EXCEPTION 'outbox_publish: event type % is not registered and outbox.require_registered_types is on; register it with outboxd event-types apply', p_event_type
                USING ERRCODE = '22023';
        END IF;
        RETURN;
    END IF;
    FOR v_key, v_value IN SELECT e.key, e.value FROM pg_catalog.jsonb_each(p_payload) AS e LOOP
        v_spec := v_fields -> v_key;
        IF v_spec IS NULL THEN
            RAISE EXCEPTION 'outbox_publish: payload field "%" is not declared for event type %', v_key, p_event_type
                USING ERRCODE = '22023';
        END IF;
        v_type := v_spec ->> 'type';
        IF v_type = 'string' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'string' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be a string', v_key USING ERRCODE = '22023';
            END IF;
            v_text := v_value #>> '{}';
            v_max := coalesce((v_spec ->> 'max_length')::integer, 256);
            IF v_text = '' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is empty', v_key USING ERRCODE = '22023';
            END IF;
            IF pg_catalog.octet_length(v_text) > v_max THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is longer than % bytes', v_key, v_max
                    USING ERRCODE = '22023';
            END IF;
            IF coalesce((v_spec ->> 'identifier')::boolean, false) THEN
                IF v_text !~ '^[A-Za-z0-9_.:-]+$' THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" is an identifier: only letters, digits and _ . : - are allowed', v_key
                        USING ERRCODE = '22023';
                END IF;
            ELSIF v_text ~ '[^ ]@[^ \t\n.]+\.[^ \t\n]' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like an e-mail address', v_key
                    USING ERRCODE = '22023';
            END IF;
            -- The maximal dotted base64url run from "eyJ" has three or more segments and no
            -- trailing dot (the lookahead leaves no shorter match to fall back on).
            IF v_text ~ 'eyJ[A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+){2,}(?![A-Za-z0-9_.-])' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a JWT', v_key USING ERRCODE = '22023';
            END IF;
            IF coalesce((v_spec ->> 'identifier')::boolean, false) THEN
                IF v_text ~ '^[0-9 +.()-]*$' AND v_text ~ '[ +.()-]'
                   AND pg_catalog.length(pg_catalog.regexp_replace(v_text, '[^0-9]', '', 'g')) >= 9 THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a phone number', v_key
                        USING ERRCODE = '22023';
                END IF;
                IF v_text ~ '[0-9]{13}' THEN
                    RAISE EXCEPTION 'outbox_publish: payload field "%" contains a run of 13 or more digits', v_key
                        USING ERRCODE = '22023';
                END IF;
            ELSIF v_text ~ '[0-9]([ +.()-]*[0-9]){8}' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is shaped like a phone number or long digit run', v_key
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'integer' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'number' OR v_value::text !~ '^-?[0-9]+$' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be an integer', v_key USING ERRCODE = '22023';
            END IF;
            IF (v_value::text)::numeric NOT BETWEEN -9223372036854775808 AND 9223372036854775807 THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" does not fit in a 64-bit integer', v_key
                    USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'number' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'number' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be a number', v_key USING ERRCODE = '22023';
            END IF;
            IF pg_catalog.abs((v_value::text)::numeric) > 1.7976931348623157e308 THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" is not a finite double', v_key USING ERRCODE = '22023';
            END IF;
        ELSIF v_type = 'boolean' THEN
            IF pg_catalog.jsonb_typeof(v_value) <> 'boolean' THEN
                RAISE EXCEPTION 'outbox_publish: payload field "%" must be true or false', v_key USING ERRCODE = '22023';
            END IF;
        ELSE
            RAISE EXCEPTION 'outbox_publish: the registry declares field "%" of % with an unknown type', v_key, p_event_type
                USING ERRCODE = '22023';
        END IF;
    END LOOP;
END
$$;

-- V10's outbox_publish (SECURITY DEFINER, pinned search_path, per-aggregate sequence) with
-- one addition: the registry check after the shape checks. CREATE OR REPLACE keeps its grants.
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
    PERFORM outbox_check_registered_payload(p_event_type, p_payload);
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
