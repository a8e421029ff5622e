-- outboxd: no-transaction
-- online: yes
-- The partial indexes of V10's ordering rule and of retention's walk over DISCARDED rows.
--
-- Online: built CONCURRENTLY, outside a transaction (the marker on the first line), so
-- claims and outcomes keep writing while each index is built; a failed build leaves an
-- INVALID index that the migrator drops before retrying. Until the first index exists the
-- claim's ordering lookup reads the table instead: slower, never wrong.

-- The claim's ordering rule looks up unfinished predecessors here: only events that are
-- not finished, so the index stays as small as the backlog.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_aggregate_idx ON event_publication (company_id, aggregate_key, aggregate_seq)
    WHERE aggregate_seq IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED');

-- Retention walks old DISCARDED rows like old COMPLETED ones.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_discarded_idx ON event_publication (completed_at) WHERE status = 'DISCARDED';
