-- Least-privilege roles and pinned search_path (docs/security.md).
--
-- Every outbox function now runs with the search_path the migrator sets while migrating
-- (SET search_path FROM CURRENT = <outbox schema>, pg_temp: pg_catalog is searched first
-- because it is not named, temporary tables last), so a role that can create objects in
-- some other schema on a caller's path cannot shadow what the functions call.
-- Polymorphic built-ins and calls that need an implicit cast are qualified or cast to the
-- exact types, because an exact match in any schema on the path outranks them even with
-- pg_catalog first.
--
-- outbox_publish becomes SECURITY DEFINER and is no longer executable by PUBLIC: a
-- publisher role needs EXECUTE on it (outboxd migrate --publisher-role grants it) and no
-- privilege on any table. It also screens aggregate_key for personal data with
-- outbox_check_free_text, the rules of the C++ publish().
--
-- outbox_role stores the roles named to outboxd migrate, so every later migrate grants
-- them again (tables added by later migrations included).
--
-- Online: signatures are unchanged and bodies behave the same for valid input; hosts of
-- the previous release keep calling them (as the schema owner). Roles that could publish
-- before (INSERT on event_publication) are granted EXECUTE on outbox_publish here, so
-- publishers of the previous release keep publishing after PUBLIC loses EXECUTE.

CREATE TABLE outbox_role (
    kind      text PRIMARY KEY CHECK (kind IN ('runtime', 'publisher')),
    role_name text NOT NULL CHECK (pg_catalog.length(role_name) BETWEEN 1 AND 63)
);

ALTER FUNCTION outbox_reject_modification() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_delete_consumption() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_reserve_call_slot(text, interval, interval) SET search_path FROM CURRENT;

-- Screens free text that operators read (aggregate_key) with the rules of the C++ SDK's
-- outbox::sdk::detail::free_text_rule: e-mail, JWT, phone-shaped, or a run of 13+ digits
-- inside other text (a value of digits only is a numeric id, like Integer payload fields).
-- The error names the field and the rule, never the value.
CREATE FUNCTION outbox_check_free_text(p_value text, p_field text)
RETURNS void LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
    v_rule text;
BEGIN
    IF p_value IS NULL THEN
        RETURN;
    END IF;
    IF p_value ~ ('[^ ]@[^ ' || pg_catalog.chr(9) || pg_catalog.chr(10) || '.]+[.][^ '
                  || pg_catalog.chr(9) || pg_catalog.chr(10) || ']') THEN
        v_rule := 'value is shaped like an e-mail address';
    ELSIF p_value ~ 'eyJ[A-Za-z0-9_-]*([.][A-Za-z0-9_-]+){2,}([^.A-Za-z0-9_-]|$)' THEN
        v_rule := 'value is shaped like a JWT';
    ELSIF p_value ~ '^[0-9 +.()-]+$' AND p_value ~ '[ +.()-]'
          AND pg_catalog.length(pg_catalog.regexp_replace(p_value, '[^0-9]', '', 'g')) >= 9 THEN
        v_rule := 'value is shaped like a phone number';
    ELSIF p_value ~ '[0-9]{13}' AND p_value !~ '^[0-9]+$' THEN
        v_rule := 'value contains a run of 13 or more digits';
    END IF;
    IF v_rule IS NOT NULL THEN
        RAISE EXCEPTION '%: %', p_field, v_rule USING ERRCODE = '22023';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION outbox_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path FROM CURRENT AS $$
    SELECT pg_catalog.encode(
        pg_catalog.set_bit(pg_catalog.set_bit(
            overlay(pg_catalog.uuid_send(pg_catalog.gen_random_uuid())
                    PLACING substring(pg_catalog.int8send(pg_catalog.floor(
                        extract(epoch FROM pg_catalog.clock_timestamp()) * 1000::numeric)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52::bigint, 1), 53::bigint, 1),
        'hex')::uuid
$$;

CREATE OR REPLACE FUNCTION outbox_fence(p_event_id uuid, p_lease_token uuid, p_handlers text[], p_complete boolean)
RETURNS void LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF p_complete THEN
        UPDATE event_publication
        SET status = 'COMPLETED', completed_at = now(), lease_owner = NULL, lease_token = NULL,
            lease_expires_at = NULL, version = version + 1, updated_at = now()
        WHERE event_id = p_event_id AND lease_token = p_lease_token;
    ELSE
        PERFORM 1 FROM event_publication WHERE event_id = p_event_id AND lease_token = p_lease_token FOR SHARE;
    END IF;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'outboxd: the lease on this event was lost' USING ERRCODE = 'OB001';
    END IF;
    INSERT INTO event_consumption (event_id, handler_name)
    SELECT p_event_id, h FROM pg_catalog.unnest(p_handlers) AS h
    ON CONFLICT DO NOTHING;
END
$$;

CREATE OR REPLACE FUNCTION outbox_try_acquire_call_slot(p_key integer, p_max integer, p_held integer[])
RETURNS integer LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_start integer := pg_catalog.floor(pg_catalog.random() * p_max::double precision)::integer;
    v_slot  integer;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(p_key, -1);
    FOR i IN 0 .. p_max - 1 LOOP
        v_slot := (v_start + i) % p_max;
        IF NOT (v_slot = ANY (p_held))
           AND NOT EXISTS (SELECT 1 FROM outbox_handler_slot s
                           WHERE s.slot = v_slot AND pg_catalog.hashtext('outboxd:'::text || s.handler_name) = p_key
                             AND s.expires_at > pg_catalog.clock_timestamp())
           AND pg_catalog.pg_try_advisory_lock(p_key, v_slot) THEN
            RETURN v_slot;
        END IF;
    END LOOP;
    RETURN -1;
END
$$;

CREATE OR REPLACE FUNCTION outbox_take_handler_slot(p_handler text, p_max integer, p_holder text, p_ttl interval)
RETURNS TABLE (taken_slot integer, taken_token uuid) LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_key integer     := pg_catalog.hashtext('outboxd:'::text || p_handler);
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(v_key, -1);
    INSERT INTO outbox_handler_slot (handler_name, slot)
        SELECT p_handler, g FROM pg_catalog.generate_series(0, p_max - 1) AS g
        ON CONFLICT DO NOTHING;
    RETURN QUERY
    UPDATE outbox_handler_slot s
    SET holder = p_holder, token = pg_catalog.gen_random_uuid(), expires_at = v_now + p_ttl
    WHERE s.handler_name = p_handler AND s.slot = (
        SELECT f.slot FROM outbox_handler_slot f
        WHERE f.handler_name = p_handler AND f.slot < p_max
          AND (f.token IS NULL OR f.expires_at <= v_now)
          -- a previous-release host holds it as advisory lock (key, slot)
          AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                          WHERE l.locktype = 'advisory' AND l.objsubid = 2
                            AND l.classid = v_key::oid AND l.objid = f.slot::oid)
        ORDER BY pg_catalog.random()
        LIMIT 1)
    RETURNING s.slot, s.token;
END
$$;

-- V1's function; the only change is the aggregate_key screening (one PERFORM), SECURITY
-- DEFINER and the pinned search_path.
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
REVOKE ALL ON FUNCTION outbox_publish(text, text, jsonb, text, text) FROM PUBLIC;
DO $$
DECLARE
    v_grantee text;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT g.grantee FROM information_schema.role_table_grants g
        WHERE g.table_schema = pg_catalog.current_schema() AND g.table_name = 'event_publication'
          AND g.privilege_type = 'INSERT' AND g.grantee <> current_user
    LOOP
        -- Where every role could insert, every role keeps publishing (PUBLIC is a keyword,
        -- not a role name to quote).
        IF v_grantee = 'PUBLIC' THEN
            GRANT EXECUTE ON FUNCTION outbox_publish(text, text, jsonb, text, text) TO PUBLIC;
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION outbox_publish(text, text, jsonb, text, text) TO %I',
                                      v_grantee);
        END IF;
    END LOOP;
END
$$;
