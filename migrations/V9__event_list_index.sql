-- outboxd: no-transaction
-- The admin event list (newest first, per company, paged by (occurred_at, event_id)) reads
-- this index instead of scanning event_publication.
--
-- Online: built CONCURRENTLY, outside a transaction (the marker on the first line), so
-- claims and publishes keep writing while it builds. If the build fails midway, PostgreSQL
-- leaves an INVALID index; the next `outboxd migrate` drops it (DROP INDEX CONCURRENTLY)
-- and builds it again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_company_list_idx
    ON event_publication (company_id, occurred_at DESC, event_id DESC);
