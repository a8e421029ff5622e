-- online: yes
-- Every attempt on record (flow control item 6): one row per handler call of an attempt
-- (event, attempt number, handler, host, start, end, outcome, error code, when its retry is
-- due), written by the statement that stores the attempt's outcome: the completer's batch,
-- or the fence of a handler's own transaction when it completes the event. A host that dies
-- mid-attempt gets a 'worker_lost' row (handler NULL) from the rescue that retries its event.
-- outbox.attempt_history (all, failures, off) chooses what the hosts write.
--
-- Partitioned by range of ended_at, outbox.history_partition wide: retention drops whole
-- partitions older than outbox.retention, never a row at a time. The hosts create the
-- partitions ahead of time through outbox_attempt_maintain() (SECURITY DEFINER: the runtime
-- role owns nothing and so cannot create or drop a partition itself); the function records
-- each partition's range in outbox_attempt_partition. A row whose partition does not exist
-- yet (a host that has not created them, a clock far ahead) lands in the default partition
-- and is moved into its range's partition when that is created, or deleted with the rest
-- of its age.
--
-- Online: new tables and a function only; hosts of earlier releases never read them.
SET LOCAL lock_timeout = '5s';

CREATE TABLE outbox_attempt (
    event_id    uuid        NOT NULL,
    company_id  text        NOT NULL,
    attempt     integer     NOT NULL CHECK (attempt >= 0),
    handler     text        NULL,
    host        text        NOT NULL,
    started_at  timestamptz NOT NULL,
    ended_at    timestamptz NOT NULL,
    outcome     text        NOT NULL CHECK (outcome IN ('succeeded', 'retry', 'review_required', 'timeout', 'worker_lost')),
    error_code  text        NULL,
    retry_after timestamptz NULL
) PARTITION BY RANGE (ended_at);

CREATE INDEX outbox_attempt_event_idx ON outbox_attempt (event_id, attempt);

CREATE TABLE outbox_attempt_default PARTITION OF outbox_attempt DEFAULT;

CREATE TABLE outbox_attempt_partition (
    name       text        PRIMARY KEY,
    lower_at   timestamptz NOT NULL,
    upper_at   timestamptz NOT NULL CHECK (upper_at > lower_at)
);

-- Creates the partitions that cover [p_now - p_width, p_now + p_ahead), aligned to p_width
-- from the epoch; where an existing partition covers part of a range (a changed width), only
-- the uncovered rest is created. Rows of a new range in the default partition move into it
-- first. Then deletes default-partition rows older than p_now - p_retention (at most 10,000
-- a call) and, last (the drop locks outbox_attempt until the commit that follows at once),
-- drops the partitions whose range ended before it. Answers what it did. At most 100
-- partitions are created per call; p_now must be within a day of now(). Runs under the
-- caller's lock_timeout. Executable by the runtime role only (granted by migrate), never by
-- PUBLIC: publishers and other roles of the application cannot drop the history.
CREATE FUNCTION outbox_attempt_maintain(p_width interval, p_ahead interval, p_retention interval,
                                        p_now timestamptz DEFAULT now(),
                                        OUT created integer, OUT dropped integer, OUT moved bigint,
                                        OUT deleted bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    v_lower   timestamptz;
    v_from    timestamptz;
    v_upper   timestamptz;
    v_covered timestamptz;
    v_name    text;
    v_part    record;
    v_n       bigint;
BEGIN
    created := 0; dropped := 0; moved := 0; deleted := 0;
    IF p_width IS NULL OR p_width < interval '1 minute' OR p_width > interval '366 days' THEN
        RAISE EXCEPTION 'outbox_attempt_maintain: the width must be between 1 minute and 366 days' USING ERRCODE = '22023';
    END IF;
    IF p_ahead IS NULL OR p_ahead < interval '0' OR p_ahead > p_width + interval '1 day' THEN
        RAISE EXCEPTION 'outbox_attempt_maintain: ahead must be between 0 and the width plus a day' USING ERRCODE = '22023';
    END IF;
    IF p_retention IS NULL OR p_retention < interval '1 minute' THEN
        RAISE EXCEPTION 'outbox_attempt_maintain: the retention must be at least 1 minute' USING ERRCODE = '22023';
    END IF;
    IF p_now IS NULL OR p_now < now() - interval '1 day' OR p_now > now() + interval '1 day' THEN
        RAISE EXCEPTION 'outbox_attempt_maintain: now must be within a day of the server''s clock' USING ERRCODE = '22023';
    END IF;
    v_lower := pg_catalog.date_bin(p_width, p_now - p_width, timestamptz '1970-01-01 00:00:00+00');
    WHILE v_lower < p_now + p_ahead AND created < 100 LOOP
        v_upper := v_lower + p_width;
        SELECT max(p.upper_at) INTO v_covered FROM outbox_attempt_partition p
        WHERE p.lower_at < v_upper AND p.upper_at > v_lower;
        v_from := CASE WHEN v_covered IS NULL THEN v_lower ELSE greatest(v_lower, v_covered) END;
        IF v_from < v_upper AND v_upper > p_now - p_retention AND NOT EXISTS (
            SELECT 1 FROM outbox_attempt_partition p WHERE p.lower_at < v_upper AND p.upper_at > v_from) THEN
            v_name := 'outbox_attempt_' || pg_catalog.to_char(v_from AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
            -- Rows of this range in the default partition move first (locked against new ones
            -- meanwhile), or attaching the partition would fail its check of the default.
            LOCK TABLE outbox_attempt_default IN SHARE ROW EXCLUSIVE MODE;
            EXECUTE pg_catalog.format('CREATE TABLE %I (LIKE outbox_attempt INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                                      v_name);
            EXECUTE pg_catalog.format(
                'WITH m AS (DELETE FROM outbox_attempt_default WHERE ended_at >= $1 AND ended_at < $2 RETURNING *) '
                'INSERT INTO %I SELECT * FROM m', v_name) USING v_from, v_upper;
            GET DIAGNOSTICS v_n = ROW_COUNT;
            moved := moved + v_n;
            EXECUTE pg_catalog.format('ALTER TABLE outbox_attempt ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                                      v_name, v_from, v_upper);
            INSERT INTO outbox_attempt_partition (name, lower_at, upper_at) VALUES (v_name, v_from, v_upper);
            created := created + 1;
        END IF;
        v_lower := v_upper;
    END LOOP;
    DELETE FROM outbox_attempt_default WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM outbox_attempt_default WHERE ended_at < p_now - p_retention LIMIT 10000));
    GET DIAGNOSTICS deleted = ROW_COUNT;
    FOR v_part IN SELECT name FROM outbox_attempt_partition WHERE upper_at <= p_now - p_retention ORDER BY lower_at LOOP
        EXECUTE pg_catalog.format('DROP TABLE IF EXISTS %I', v_part.name);
        DELETE FROM outbox_attempt_partition WHERE name = v_part.name;
        dropped := dropped + 1;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION outbox_attempt_maintain(interval, interval, interval, timestamptz) FROM PUBLIC;
