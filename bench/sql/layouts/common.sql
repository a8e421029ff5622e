-- Helpers shared by the partitioned candidates. Loaded into a database migrated by
-- `outboxd migrate` (the candidates reuse its helper functions: outbox_uuid_v7,
-- outbox_next_aggregate_seq, outbox_check_registered_payload, outbox_check_free_text).

-- The smallest uuid v7 at or after a time: its first 48 bits are the Unix time in
-- milliseconds, so a range of event ids is a range of publication times and a partition of
-- the history by event_id is a partition by time (a lookup by id prunes to one partition,
-- and a primary key on event_id is legal on the partitioned table).
CREATE FUNCTION lay_uuid_floor(t timestamptz) RETURNS uuid LANGUAGE sql IMMUTABLE AS $$
    SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM (SELECT lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0') AS h) AS x
$$;

-- Creates the partitions of PARENT covering [from, to) in steps of WIDTH, named
-- PARENT_pYYYYMMDDHH24MI (what hosts would do ahead of time, under a lock).
CREATE FUNCTION lay_make_partitions(parent text, from_t timestamptz, to_t timestamptz, width interval)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t timestamptz := date_trunc('minute', from_t);
BEGIN
    WHILE t < to_t LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
                       parent || '_p' || to_char(t AT TIME ZONE 'UTC', 'YYYYMMDDHH24MI'), parent,
                       lay_uuid_floor(t), lay_uuid_floor(t + width));
        t := t + width;
    END LOOP;
END
$$;

-- Retention by partition: drops every partition of PARENT whose upper bound is at or before
-- CUTOFF, unless the queue QUEUE still holds an event of its range (an unfinished or
-- REVIEW_REQUIRED event is never dropped; the real design copies such rare rows to a
-- carry-over partition first). Returns the partitions dropped.
CREATE FUNCTION lay_drop_partitions(parent text, queue text, cutoff timestamptz) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    p record;
    lo uuid;
    hi uuid;
    busy boolean;
    dropped int := 0;
BEGIN
    FOR p IN SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) AS bound
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = parent::regclass ORDER BY 1 LOOP
        lo := substring(p.bound FROM $r$FROM \('([^']+)'\)$r$)::uuid;
        hi := substring(p.bound FROM $r$TO \('([^']+)'\)$r$)::uuid;
        CONTINUE WHEN hi > lay_uuid_floor(cutoff);
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %I WHERE event_id >= %L AND event_id < %L)', queue, lo, hi)
            INTO busy;
        CONTINUE WHEN busy;
        EXECUTE format('DROP TABLE %I', p.relname);
        dropped := dropped + 1;
    END LOOP;
    RETURN dropped;
END
$$;

-- Dedup over the retention window for the candidates whose history is partitioned (a
-- unique index there would have to include the partition key): one row per event
-- published WITH a dedup_key only, deleted by retention row by row (events without a key
-- pay nothing).
CREATE TABLE lay_dedup (
    company_id text NOT NULL,
    event_type text NOT NULL,
    dedup_key text NOT NULL,
    event_id uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (company_id, event_type, dedup_key)
);
