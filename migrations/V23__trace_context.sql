-- online: yes
-- W3C trace context from the publishing transaction to the handler (ecosystem item 3).
--
-- event_publication gains traceparent and tracestate (NULL: the publisher gave none).
-- outbox_publish() takes them as named parameters, traceparent => text and
-- tracestate => text, and, when traceparent is not passed, from the transaction's settings
-- outbox.traceparent and outbox.tracestate, so an application that already calls it can
-- add tracing with one `SET LOCAL outbox.traceparent = '...'` (or set_config(..., true))
-- before its calls, outbox_publish_many() included. Hosts hand the pair to handlers
-- (Context::trace(), SDK 1.2), whose HTTP helper and the NATS relay send it on.
--
-- A traceparent is kept only when it parses as W3C Trace Context level 1 says (version 00:
-- exactly 55 characters; a later version: at least the same fields, stored as 00 since
-- that is the version hosts send on; version ff, upper-case hex, an all-zero trace id or
-- parent id: dropped). A tracestate is kept only with a kept traceparent, when it is at most
-- 512 printable ASCII characters (the length W3C asks every participant to pass on). Both
-- are opaque: no host logs them or shows them in an error.
--
-- outbox_publish() gains two parameters, so, as in V19, the old one is renamed out of the
-- way (outbox_publish_superseded_v22) and the new one created in this transaction with its
-- EXECUTE grants copied; calls with up to six arguments and
-- named calls resolve to the new function unchanged.
--
-- Online: the ALTER TABLE adds two nullable columns without default (no rewrite, no scan)
-- under an instant ACCESS EXCLUSIVE lock, bounded by lock_timeout; the migration can be
-- re-run. Hosts and publishers of 0.2.0 never name the columns and keep working; their
-- claims do not read them, so their handlers see no trace context.
SET LOCAL lock_timeout = '5s';

ALTER TABLE event_publication ADD COLUMN traceparent text NULL, ADD COLUMN tracestate text NULL;

-- The traceparent to store for `value`, or NULL when it is not a valid one.
CREATE FUNCTION outbox_trace_parent(p_value text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    SELECT CASE
        WHEN p_value IS NULL OR p_value !~ '^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-|$)' THEN NULL
        WHEN pg_catalog.left(p_value, 2) = 'ff' THEN NULL
        WHEN pg_catalog.left(p_value, 2) = '00' AND pg_catalog.length(p_value) <> 55 THEN NULL
        WHEN pg_catalog.substr(p_value, 4, 32) = '00000000000000000000000000000000' THEN NULL
        WHEN pg_catalog.substr(p_value, 37, 16) = '0000000000000000' THEN NULL
        ELSE '00-' || pg_catalog.substr(p_value, 4, 52)
    END
$$;

-- The tracestate to store for `value`, or NULL when it is empty or not a valid one.
CREATE FUNCTION outbox_trace_state(p_value text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
    SELECT CASE
        WHEN p_value IS NULL OR pg_catalog.btrim(p_value, ' ') = '' THEN NULL
        WHEN pg_catalog.octet_length(p_value) > 512 OR p_value !~ '^[ -~]+$' THEN NULL
        ELSE p_value
    END
$$;

CREATE TEMPORARY TABLE outbox_publish_acl ON COMMIT DROP AS
    SELECT p.proacl IS NULL AS default_acl, a.grantee, a.is_grantable
    FROM pg_catalog.pg_proc p
    LEFT JOIN LATERAL pg_catalog.aclexplode(p.proacl) a ON a.privilege_type = 'EXECUTE'
    WHERE p.oid = 'outbox_publish(text, text, jsonb, text, text, timestamptz)'::pg_catalog.regprocedure;

-- Renamed, not dropped, as in V19: a call resolved just before this commit still runs.
ALTER FUNCTION outbox_publish(text, text, jsonb, text, text, timestamptz) RENAME TO outbox_publish_superseded_v22;

-- V19's outbox_publish with the trace context.
CREATE FUNCTION outbox_publish(
    p_company_id text,
    p_event_type text,
    p_payload jsonb,
    p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL,
    deliver_after timestamptz DEFAULT NULL,
    traceparent text DEFAULT NULL,
    tracestate text DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    v_id uuid;
    v_bad_key text;
    v_traceparent text;
    v_tracestate text;
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
    -- 'infinity' would never be due. A time more than a year ahead is refused too: it is
    -- far more often a unit or year typo than a plan, and a keyed event would hold back its
    -- aggregate that long; a schedule that far out belongs in the application.
    IF outbox_publish.deliver_after IS NOT NULL AND NOT pg_catalog.isfinite(outbox_publish.deliver_after) THEN
        RAISE EXCEPTION 'outbox_publish: deliver_after must be a finite time' USING ERRCODE = '22023';
    END IF;
    IF outbox_publish.deliver_after > now() + interval '1 year' THEN
        RAISE EXCEPTION 'outbox_publish: deliver_after is more than 1 year ahead' USING ERRCODE = '22023';
    END IF;

    -- The trace context is read as a pair: from the arguments when traceparent is passed,
    -- otherwise from the transaction's outbox.traceparent / outbox.tracestate settings.
    -- A malformed one is dropped, not refused: it usually comes from an outside request's
    -- header, and W3C Trace Context says to start a new trace then, never to fail.
    IF outbox_publish.traceparent IS NOT NULL THEN
        v_traceparent := outbox_trace_parent(outbox_publish.traceparent);
        v_tracestate := outbox_publish.tracestate;
    ELSE
        v_traceparent := outbox_trace_parent(pg_catalog.current_setting('outbox.traceparent', true));
        v_tracestate := pg_catalog.current_setting('outbox.tracestate', true);
    END IF;
    v_tracestate := CASE WHEN v_traceparent IS NOT NULL THEN outbox_trace_state(v_tracestate) END;

    IF p_dedup_key IS NULL THEN
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload,
                                       deliver_after, next_attempt_at, traceparent, tracestate)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_payload,
                    outbox_publish.deliver_after, greatest(outbox_publish.deliver_after, now()),
                    v_traceparent, v_tracestate)
            RETURNING event_id INTO v_id;
    ELSE
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload,
                                       deliver_after, next_attempt_at, traceparent, tracestate)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_dedup_key, p_payload,
                    outbox_publish.deliver_after, greatest(outbox_publish.deliver_after, now()),
                    v_traceparent, v_tracestate)
            ON CONFLICT (company_id, event_type, dedup_key) WHERE dedup_key IS NOT NULL DO NOTHING
            RETURNING event_id INTO v_id;
        IF v_id IS NULL THEN
            -- The publisher role names any company_id, so the existing event's id goes only
            -- to a login that may read events anyway; the publisher role gets NULL.
            IF NOT pg_catalog.has_table_privilege(session_user, 'event_publication', 'SELECT') THEN
                RETURN NULL;
            END IF;
            SELECT event_id INTO v_id FROM event_publication
                WHERE company_id = p_company_id AND event_type = p_event_type AND dedup_key = p_dedup_key;
            RETURN v_id;
        END IF;
    END IF;
    -- Identical notifications in one transaction are folded into one by PostgreSQL. A delayed
    -- event wakes the hosts for nothing now; they find it by polling once it is due.
    PERFORM pg_notify('outboxd_events', p_event_type);
    RETURN v_id;
END
$$;

-- The old function's EXECUTE grants, on the new one: the publisher role, the runtime role
-- and any role granted by hand keep publishing without waiting for the next migrate's grants.
DO $$
DECLARE
    v_grant record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM outbox_publish_acl WHERE default_acl) THEN
        REVOKE ALL ON FUNCTION outbox_publish(text, text, jsonb, text, text, timestamptz, text, text) FROM PUBLIC;
    END IF;
    FOR v_grant IN SELECT grantee, is_grantable FROM outbox_publish_acl WHERE grantee IS NOT NULL LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION outbox_publish(text, text, jsonb, text, text, timestamptz, text, text) TO %s%s',
                                  CASE WHEN v_grant.grantee = 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(v_grant.grantee)) END,
                                  CASE WHEN v_grant.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
