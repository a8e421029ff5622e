-- Fleet-wide concurrency slots as leased rows (handlers.<name>.max_concurrency).
--
-- V2 made slot i of a handler a session advisory lock on one limiter connection: a
-- connection blip freed every slot server-side while the host's calls still ran, and session
-- locks do not work behind a pooler in transaction mode. A slot is now a row that a host
-- holds with a token until an expiry it keeps renewing: a host that loses its connection
-- keeps its slots (for as long as the expiry allows) and renews them once reconnected; a
-- host that dies frees them when they expire.
--
-- Online (expand-only): V2's functions stay. Hosts of the previous release keep taking
-- advisory locks through outbox_try_acquire_call_slot, which from now on also skips slots
-- held as rows, and outbox_take_handler_slot skips slots held as advisory locks, so a fleet
-- in the middle of a rolling upgrade still respects max_concurrency.

CREATE TABLE outbox_handler_slot (
    handler_name text        NOT NULL CHECK (length(handler_name) BETWEEN 1 AND 100),
    slot         integer     NOT NULL CHECK (slot >= 0),
    holder       text        NULL,   -- host id, for operators
    token        uuid        NULL,   -- new at every take; renewals and releases are fenced on it
    expires_at   timestamptz NULL,
    PRIMARY KEY (handler_name, slot),
    CONSTRAINT outbox_handler_slot_held_check
        CHECK ((token IS NULL) = (expires_at IS NULL) AND (token IS NULL) = (holder IS NULL))
);

-- Takes one free or expired slot of p_handler below p_max for p_holder, held until now +
-- p_ttl unless renewed. Returns no row when all are busy. A transaction-scoped advisory
-- lock on (key, -1) serializes takers of one handler, including previous-release hosts
-- (see below), so a slot is never handed out twice; it is released at commit, which keeps
-- this working behind a transaction-mode pooler.
CREATE FUNCTION outbox_take_handler_slot(p_handler text, p_max integer, p_holder text, p_ttl interval)
RETURNS TABLE (taken_slot integer, taken_token uuid) LANGUAGE plpgsql AS $$
DECLARE
    v_key integer     := hashtext('outboxd:' || p_handler);
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM pg_advisory_xact_lock(v_key, -1);
    INSERT INTO outbox_handler_slot (handler_name, slot)
        SELECT p_handler, g FROM generate_series(0, p_max - 1) AS g
        ON CONFLICT DO NOTHING;
    RETURN QUERY
    UPDATE outbox_handler_slot s
    SET holder = p_holder, token = gen_random_uuid(), expires_at = v_now + p_ttl
    WHERE s.handler_name = p_handler AND s.slot = (
        SELECT f.slot FROM outbox_handler_slot f
        WHERE f.handler_name = p_handler AND f.slot < p_max
          AND (f.token IS NULL OR f.expires_at <= v_now)
          -- a previous-release host holds it as advisory lock (key, slot)
          AND NOT EXISTS (SELECT 1 FROM pg_locks l
                          WHERE l.locktype = 'advisory' AND l.objsubid = 2
                            AND l.classid = v_key::oid AND l.objid = f.slot::oid)
        ORDER BY random()
        LIMIT 1)
    RETURNING s.slot, s.token;
END
$$;

-- V2's function for hosts of the previous release: same contract, but a slot held as a row
-- by a newer host counts as busy, and takers are serialized with outbox_take_handler_slot.
CREATE OR REPLACE FUNCTION outbox_try_acquire_call_slot(p_key integer, p_max integer, p_held integer[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_start integer := floor(random() * p_max)::integer;
    v_slot  integer;
BEGIN
    PERFORM pg_advisory_xact_lock(p_key, -1);
    FOR i IN 0 .. p_max - 1 LOOP
        v_slot := (v_start + i) % p_max;
        IF NOT (v_slot = ANY (p_held))
           AND NOT EXISTS (SELECT 1 FROM outbox_handler_slot s
                           WHERE s.slot = v_slot AND hashtext('outboxd:' || s.handler_name) = p_key
                             AND s.expires_at > clock_timestamp())
           AND pg_try_advisory_lock(p_key, v_slot) THEN
            RETURN v_slot;
        END IF;
    END LOOP;
    RETURN -1;
END
$$;
