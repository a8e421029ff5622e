-- online: yes
-- Replay and backfill (flow control item 4): an operator job with action 'replay' re-runs
-- COMPLETED or DISCARDED events for one named handler, e.g. after a fix, or to backfill a
-- handler added after the events completed.
--
-- A replayed event is PENDING again with replay_handler set to that handler. Hosts of this
-- release call only that handler for it, and tell it the delivery is a replay
-- (Context::replay(), SDK 1.3). The job also writes the consumption rows of the event
-- type's other handlers, so hosts of earlier releases, which do not read the column, call
-- no other handler either. The column stays set once the event completes again: it records
-- what the last replay was for. A new event has it NULL.
--
-- The replay jobs pace themselves on this column: a batch starts only while fewer replayed
-- events than one batch are unfinished, so a replay never floods the queue ahead of new work.
--
-- Online: a nullable column without a default is a catalog change only (no rewrite, a brief
-- ACCESS EXCLUSIVE lock bounded by lock_timeout), and its check is added NOT VALID, so no
-- existing row is scanned under the lock (every existing row is NULL anyway); hosts of
-- earlier releases never read the column.
SET LOCAL lock_timeout = '5s';

ALTER TABLE event_publication ADD COLUMN replay_handler text NULL;
ALTER TABLE event_publication ADD CONSTRAINT event_publication_replay_handler_check
    CHECK (replay_handler ~ '^[a-z0-9][a-z0-9._-]{0,99}$') NOT VALID;
