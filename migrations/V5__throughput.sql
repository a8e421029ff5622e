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

-- Consumption rows are written only by outboxd, under a lease fence on their event. The
-- foreign key added nothing to that but cost every consumption row a lookup of its event
-- and a WAL-logged row lock on it. Deleting events (retention, or by hand) still deletes
-- their consumption rows: a statement-level trigger does it once per DELETE statement.
ALTER TABLE event_consumption DROP CONSTRAINT event_consumption_event_id_fkey;

CREATE FUNCTION outbox_delete_consumption() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_consumption c USING deleted_events d WHERE c.event_id = d.event_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER event_publication_delete_consumption AFTER DELETE ON event_publication
    REFERENCING OLD TABLE AS deleted_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox_delete_consumption();

-- The fence a handler's transaction runs just before its commit, sent in one round trip
-- with the COMMIT. If and only if the lease is still the caller's, it locks the event row
-- (so a host taking the event over waits for this commit) and records the handlers as
-- consumers; with p_complete it also moves the event to COMPLETED (the last handler of a
-- clean attempt). A lost lease raises SQLSTATE OB001, which stops the COMMIT that follows.
CREATE FUNCTION outbox_fence(p_event_id uuid, p_lease_token uuid, p_handlers text[], p_complete boolean)
RETURNS void LANGUAGE plpgsql AS $$
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
    SELECT p_event_id, h FROM unnest(p_handlers) AS h
    ON CONFLICT DO NOTHING;
END
$$;
