-- Throughput on large tables (issue: performance).

-- Time-ordered event ids (UUID version 7 layout: 48 bits of Unix milliseconds, then random
-- bits). Random version-4 ids scatter every new event, and its consumption rows, over the
-- whole primary-key indexes, so once those indexes outgrow the cache each claim and each
-- outcome reads index pages from disk. Time-ordered ids keep the recent events, the only
-- ones hosts touch, together at the right edge of the indexes. Publishers that pass their
-- own ids keep doing so.
CREATE FUNCTION outbox_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
ALTER TABLE event_publication ALTER COLUMN event_id SET DEFAULT outbox_uuid_v7();

-- Consumption rows are written only by outboxd, under a lease fence on their event, and
-- retention deletes them with their event. The foreign key added nothing to that but cost
-- every consumption row a lookup of its event and a WAL-logged row lock on it.
ALTER TABLE event_consumption DROP CONSTRAINT event_consumption_event_id_fkey;
