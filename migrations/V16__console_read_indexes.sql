-- outboxd: no-transaction
-- online: yes
-- Two indexes for the operator console's reads.
--
-- Online: each built CONCURRENTLY, outside a transaction (the marker on the first line), so
-- claims, outcomes and operator actions keep writing while it builds; a failed build leaves
-- an INVALID index that the migrator drops before retrying. Until they exist the console's
-- reads scan instead: slower, never wrong. Hosts of the previous release do not use them.

-- The overview's counts per (event type, status) of one company, for the statuses that
-- grow without bound: an index-only scan instead of reading every row of the company. An
-- event enters it once, when it finishes (the statuses before that are counted from the
-- claim's partial indexes), so the work per event grows by one index entry.
CREATE INDEX CONCURRENTLY IF NOT EXISTS event_publication_company_finished_idx
    ON event_publication (company_id, status, event_type) WHERE status IN ('COMPLETED', 'DISCARDED');

-- An event's history: the channel (api or cli) and the bulk request of a re-drive or
-- discard are recorded only in the action's audit_event row, looked up by target (the
-- event id) and action.
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_event_target_idx ON audit_event (target_id, action);
