-- online: yes
-- Delayed events: outbox_publish(..., deliver_after => timestamptz). The event is stored at
-- once, in the publisher's transaction, and is not claimed before its time.
--
-- A delayed event is a PENDING row whose next_attempt_at is its time: every release's claim
-- takes only rows with next_attempt_at <= now() and applies the per-aggregate ordering rule,
-- so hosts of 0.2.0 (and 0.1.0) already honour the delay, and a delayed event holds back the
-- later events of its aggregate until it has run. The new column deliver_after keeps what
-- the publisher asked for (NULL: no delay), so the event view shows it and the lateness
-- gauges count from the later of occurred_at and deliver_after rather than from publication.
--
-- outbox_publish() gains a sixth parameter, deliver_after timestamptz DEFAULT NULL. Adding a
-- parameter makes a new function: CREATE OR REPLACE would leave two overloads and every call
-- with 3 to 5 arguments would become ambiguous. So the old function is renamed out of the
-- way (outbox_publish_superseded_v18) and the new one created in this one transaction, with
-- the old function's EXECUTE grants copied onto the new one,
-- SECURITY DEFINER and the pinned search_path as before. Positional calls with 3, 4 or 5
-- arguments and named calls (p_aggregate_key => ..., p_dedup_key => ...) resolve to it
-- unchanged, and so do statements publishers prepared before (PostgreSQL re-plans them).
--
-- Online: the ALTER TABLE takes an ACCESS EXCLUSIVE lock for an instant (a nullable column
-- without default: no rewrite, no scan); lock_timeout makes the migration fail rather than
-- queue claims behind a long transaction; it can be re-run. Hosts and publishers of 0.2.0
-- keep working: they never pass deliver_after, name their columns, and claim as before. The
-- lateness gauges of 0.2.0 hosts still count a delayed event's age from its publication.
SET LOCAL lock_timeout = '5s';

ALTER TABLE event_publication ADD COLUMN deliver_after timestamptz NULL;

CREATE TEMPORARY TABLE outbox_publish_acl ON COMMIT DROP AS
    SELECT p.proacl IS NULL AS default_acl, a.grantee, a.is_grantable
    FROM pg_catalog.pg_proc p
    LEFT JOIN LATERAL pg_catalog.aclexplode(p.proacl) a ON a.privilege_type = 'EXECUTE'
    WHERE p.oid = 'outbox_publish(text, text, jsonb, text, text)'::pg_catalog.regprocedure;

-- Renamed, not dropped: a publisher whose statement resolved the old function just before
-- this commit still runs it, where a dropped function fails its call ("cache lookup failed
-- for function"). Nothing calls it by its new name.
ALTER FUNCTION outbox_publish(text, text, jsonb, text, text) RENAME TO outbox_publish_superseded_v18;

-- V16's outbox_publish with deliver_after. The parameter is named as the contract spells it
-- (no p_ prefix) and is written outbox_publish.deliver_after in the body, apart from the
-- column of the same name.
CREATE FUNCTION outbox_publish(
    p_company_id text,
    p_event_type text,
    p_payload jsonb,
    p_aggregate_key text DEFAULT NULL,
    p_dedup_key text DEFAULT NULL,
    deliver_after timestamptz DEFAULT NULL
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
    -- 'infinity' would never be due. A time more than a year ahead is refused too: it is
    -- far more often a unit or year typo than a plan, and a keyed event would hold back its
    -- aggregate that long; a schedule that far out belongs in the application.
    IF outbox_publish.deliver_after IS NOT NULL AND NOT pg_catalog.isfinite(outbox_publish.deliver_after) THEN
        RAISE EXCEPTION 'outbox_publish: deliver_after must be a finite time' USING ERRCODE = '22023';
    END IF;
    IF outbox_publish.deliver_after > now() + interval '1 year' THEN
        RAISE EXCEPTION 'outbox_publish: deliver_after is more than 1 year ahead' USING ERRCODE = '22023';
    END IF;

    IF p_dedup_key IS NULL THEN
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, payload,
                                       deliver_after, next_attempt_at)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_payload,
                    outbox_publish.deliver_after, greatest(outbox_publish.deliver_after, now()))
            RETURNING event_id INTO v_id;
    ELSE
        INSERT INTO event_publication (company_id, event_type, aggregate_key, aggregate_seq, dedup_key, payload,
                                       deliver_after, next_attempt_at)
            VALUES (p_company_id, p_event_type, p_aggregate_key,
                    outbox_next_aggregate_seq(p_company_id, p_aggregate_key), p_dedup_key, p_payload,
                    outbox_publish.deliver_after, greatest(outbox_publish.deliver_after, now()))
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
        REVOKE ALL ON FUNCTION outbox_publish(text, text, jsonb, text, text, timestamptz) FROM PUBLIC;
    END IF;
    FOR v_grant IN SELECT grantee, is_grantable FROM outbox_publish_acl WHERE grantee IS NOT NULL LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION outbox_publish(text, text, jsonb, text, text, timestamptz) TO %s%s',
                                  CASE WHEN v_grant.grantee = 0 THEN 'PUBLIC'
                                       ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(v_grant.grantee)) END,
                                  CASE WHEN v_grant.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;
