-- online: yes
-- Publishing several keyed events in one call without deadlocks (correctness review F6).
--
-- outbox_publish() takes its aggregate's row lock in outbox_aggregate (V10) and holds it until
-- the publishing transaction ends. Two transactions that publish to the same aggregates in
-- different orders each wait for the other's lock, and PostgreSQL aborts one with 40P01.
-- outbox_publish_many() publishes a JSON array of events through outbox_publish(), one by one,
-- ordered by (aggregate_key in byte order, position in the array): every caller takes the
-- locks of the aggregates it touches in the same global order, so callers that use only
-- outbox_publish_many() (one call per transaction) never wait for each other in a cycle. The
-- ids come back in the array's order; within one aggregate the events keep the array's order.
-- Each event gets exactly outbox_publish()'s checks and screens, so the rules live in one place.
--
-- Discarding a PENDING or RETRY_WAIT event (F7) needs no schema change: outbox_discard keeps
-- the previous status as text, and DISCARDED exists since V10.
--
-- Online: a new function only; no table changes. Hosts of earlier releases never call it.
-- It is SECURITY INVOKER (it adds no privilege): a caller needs EXECUTE on outbox_publish,
-- and the roles that have that now get EXECUTE on this one as well (outboxd migrate grants
-- both to the publisher role from now on).
CREATE FUNCTION outbox_publish_many(p_company_id text, p_events jsonb)
RETURNS SETOF uuid LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    v_count integer;
    v_ids uuid[];
    v_event record;
    v_bad text;
BEGIN
    IF p_events IS NULL OR pg_catalog.jsonb_typeof(p_events) <> 'array' THEN
        RAISE EXCEPTION 'outbox_publish_many: events must be a JSON array of objects' USING ERRCODE = '22023';
    END IF;
    v_count := pg_catalog.jsonb_array_length(p_events);
    -- Shape first, so a malformed element is refused before any lock is taken.
    FOR v_event IN SELECT e.value, e.n FROM pg_catalog.jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, n) LOOP
        IF pg_catalog.jsonb_typeof(v_event.value) <> 'object' THEN
            RAISE EXCEPTION 'outbox_publish_many: event % is not a JSON object', v_event.n USING ERRCODE = '22023';
        END IF;
        -- An unknown field is most likely a misspelt key, which would silently publish unkeyed.
        SELECT k INTO v_bad FROM pg_catalog.jsonb_object_keys(v_event.value) AS k
            WHERE k NOT IN ('event_type', 'payload', 'aggregate_key', 'dedup_key') LIMIT 1;
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'outbox_publish_many: event % has an unknown field "%"', v_event.n, v_bad
                USING ERRCODE = '22023';
        END IF;
        IF pg_catalog.jsonb_typeof(v_event.value -> 'event_type') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'outbox_publish_many: event % needs event_type as a string', v_event.n
                USING ERRCODE = '22023';
        END IF;
        IF coalesce(pg_catalog.jsonb_typeof(v_event.value -> 'aggregate_key'), 'null') NOT IN ('string', 'null')
           OR coalesce(pg_catalog.jsonb_typeof(v_event.value -> 'dedup_key'), 'null') NOT IN ('string', 'null') THEN
            RAISE EXCEPTION 'outbox_publish_many: event % has an aggregate_key or dedup_key that is not a string or null',
                v_event.n USING ERRCODE = '22023';
        END IF;
    END LOOP;

    v_ids := pg_catalog.array_fill(NULL::uuid, ARRAY[v_count]);
    -- The lock order: keyed events by key bytes (COLLATE "C": the same order in every
    -- database, whatever its collation), then the unkeyed ones; ties keep the array order.
    FOR v_event IN
        SELECT e.value, e.n, e.value ->> 'aggregate_key' AS aggregate_key
        FROM pg_catalog.jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, n)
        ORDER BY e.value ->> 'aggregate_key' COLLATE "C" NULLS LAST, e.n
    LOOP
        v_ids[v_event.n] := outbox_publish(p_company_id, v_event.value ->> 'event_type', v_event.value -> 'payload',
                                           v_event.aggregate_key, v_event.value ->> 'dedup_key');
    END LOOP;
    RETURN QUERY SELECT v_ids[i] FROM pg_catalog.generate_series(1, v_count) AS i ORDER BY i;
END
$$;
REVOKE ALL ON FUNCTION outbox_publish_many(text, jsonb) FROM PUBLIC;
DO $$
DECLARE
    v_grantee text;
BEGIN
    FOR v_grantee IN
        SELECT DISTINCT r.grantee FROM information_schema.routine_privileges r
        WHERE r.routine_schema = pg_catalog.current_schema() AND r.routine_name = 'outbox_publish'
          AND r.privilege_type = 'EXECUTE' AND r.grantee <> current_user
    LOOP
        IF v_grantee = 'PUBLIC' THEN
            GRANT EXECUTE ON FUNCTION outbox_publish_many(text, jsonb) TO PUBLIC;
        ELSE
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION outbox_publish_many(text, jsonb) TO %I', v_grantee);
        END IF;
    END LOOP;
END
$$;
