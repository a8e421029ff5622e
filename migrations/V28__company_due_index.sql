-- outboxd: no-transaction
-- online: yes
-- Fair tenants (flow control item 1): the index the fair claim walks. Claims visit the
-- companies that have unfinished events one index descent each, then take each company's
-- due events in its own next_attempt_at order, so a company with a large backlog no longer
-- delays another company's new events (docs/design.md, "Fair tenants").
--
-- Its cost: one more index entry when an event is published or set to retry; claims and
-- completions do not write to it (a PROCESSING, COMPLETED or reviewed row is outside its
-- predicate).
--
-- Online: built CONCURRENTLY, outside a transaction (the marker on the first line), so
-- publishers, claims and outcomes keep writing while it builds; a failed build leaves an
-- INVALID index that the migrator drops before retrying. Hosts of 0.2.0 keep claiming
-- through event_publication_due_idx, in next_attempt_at order, unfair but correct.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_company_due_idx
    ON event_publication (company_id, next_attempt_at)
    WHERE status IN ('PENDING', 'RETRY_WAIT');
