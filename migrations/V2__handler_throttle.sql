-- Fleet-wide handler limits (handlers.<name>.rate_limit_per_second and max_concurrency).

-- Rate limit: one row per handler holding the earliest time the next call may start. Each
-- call reserves a start time and pushes next_start_at one interval further, so calls from
-- every host are spread out evenly instead of bursting at each second's start.
CREATE TABLE outbox_handler_throttle (
    handler_name  text        PRIMARY KEY CHECK (length(handler_name) BETWEEN 1 AND 100),
    next_start_at timestamptz NOT NULL DEFAULT now()
);

-- Reserves the next start slot for p_handler when it is at most p_max_wait away. Returns
-- how long to wait (zero or more) or NULL when the queue of reservations is longer than
-- p_max_wait (ask again later instead of holding a far-future slot).
CREATE FUNCTION outbox_reserve_call_slot(p_handler text, p_interval interval, p_max_wait interval)
RETURNS interval LANGUAGE plpgsql AS $$
DECLARE
    v_slot timestamptz;
    v_now  timestamptz := clock_timestamp();
BEGIN
    INSERT INTO outbox_handler_throttle (handler_name, next_start_at) VALUES (p_handler, v_now)
        ON CONFLICT (handler_name) DO NOTHING;
    SELECT greatest(next_start_at, v_now) INTO v_slot FROM outbox_handler_throttle
        WHERE handler_name = p_handler FOR UPDATE;
    IF v_slot > v_now + p_max_wait THEN
        RETURN NULL;
    END IF;
    UPDATE outbox_handler_throttle SET next_start_at = v_slot + p_interval WHERE handler_name = p_handler;
    RETURN v_slot - v_now;
END
$$;

-- Concurrency limit: slot i of a handler is the session-level advisory lock (key, i). A
-- host holds its slots on one connection, so a host that dies releases them with its
-- connection and no slot can leak. Advisory locks are re-entrant within a session, so the
-- caller passes the slots its session already holds. Returns the slot taken, or -1 when
-- all are busy.
CREATE FUNCTION outbox_try_acquire_call_slot(p_key integer, p_max integer, p_held integer[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_start integer := floor(random() * p_max)::integer;
    v_slot  integer;
BEGIN
    FOR i IN 0 .. p_max - 1 LOOP
        v_slot := (v_start + i) % p_max;
        IF NOT (v_slot = ANY (p_held)) AND pg_try_advisory_lock(p_key, v_slot) THEN
            RETURN v_slot;
        END IF;
    END LOOP;
    RETURN -1;
END
$$;
