-- outboxd: no-transaction
-- online: yes
-- The index of parked events (correctness review F8), for the sweep that releases a parked
-- event whose aggregate no longer holds it back.
--
-- A parked event is a PENDING event with a position in its aggregate that waits behind an
-- unfinished or reviewed earlier event of that aggregate; hosts park it by setting its
-- next_attempt_at to 'infinity', out of the claim's reach (V22 and docs/design.md say how
-- and why). This index holds parked events only, one entry per event while it is parked,
-- so the sweep reads one entry per parked aggregate rather than every parked event; no
-- claim, outcome or publish writes to it.
--
-- Online: built CONCURRENTLY, outside a transaction (the marker on the first line), so
-- claims and outcomes keep writing while it builds; a failed build leaves an INVALID index
-- that the migrator drops before retrying. Nothing is parked before V22, so the index
-- starts empty. Hosts of 0.2.0 neither park nor read it.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_parked_idx
    ON event_publication (company_id, aggregate_key, aggregate_seq)
    WHERE next_attempt_at = 'infinity' AND status = 'PENDING' AND aggregate_seq IS NOT NULL;
