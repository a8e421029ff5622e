-- online: yes
-- Operator jobs: re-drive, discard or cancel every event a filter matches, of any number,
-- in batches that survive the host that started them (issue 29, item 3).
--
-- One row per job. A job is started by the admin API (POST /api/v1/admin/operations) or
-- `outboxd operations start`, under an Idempotency-Key kept as a hash per company (NULL
-- company: a CLI job over every company), like outbox_bulk_retry. Any host works it: a batch
-- is one transaction that locks this row (FOR UPDATE SKIP LOCKED), acts on the next events
-- after the cursor (cursor_occurred_at, cursor_event_id: the last event read, in
-- (occurred_at, event_id) order), writes one outbox_manual_retry or outbox_discard row and
-- one audit_event row per event, and moves the cursor and the counters. Two hosts never run
-- the same batch: the row lock is the claim. A host that dies mid-batch rolls its batch back
-- with its connection, and the next host starts from the committed cursor.
--
-- Events that occurred after until_at (the job's start) are not taken, so a job ends under a
-- steady stream of new matching events. total: the events matching when it started. done:
-- events acted on. failed: events read as matching that could not be acted on (another
-- transaction held them, or their status changed first, e.g. a host claimed them).
--
-- Unlike the action tables, a job's row is updated while it runs; its events' records and
-- audit rows are append-only as before. Online: a new table only; hosts of earlier releases
-- never read it.
SET LOCAL lock_timeout = '5s';

CREATE TABLE outbox_operation (
    id                   uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    company_id           text        NULL,
    action               text        NOT NULL CHECK (action IN ('redrive', 'discard', 'cancel', 'replay')),
    filter               jsonb       NOT NULL CHECK (jsonb_typeof(filter) = 'object'),
    handler              text        NULL CHECK (handler ~ '^[a-z0-9][a-z0-9._-]{0,99}$'),
    actor                text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    reason               text        NOT NULL CHECK (char_length(reason) BETWEEN 10 AND 300),
    channel              text        NOT NULL CHECK (channel IN ('api', 'cli')),
    idempotency_key_hash text        NOT NULL,
    request_hash         text        NOT NULL,
    state                text        NOT NULL DEFAULT 'running'
                                     CHECK (state IN ('running', 'done', 'cancelled', 'failed')),
    total                bigint      NOT NULL CHECK (total >= 0),
    done                 bigint      NOT NULL DEFAULT 0 CHECK (done >= 0),
    failed               bigint      NOT NULL DEFAULT 0 CHECK (failed >= 0),
    until_at             timestamptz NOT NULL DEFAULT now(),
    cursor_occurred_at   timestamptz NULL,
    cursor_event_id      uuid        NULL,
    error                text        NULL CHECK (length(error) <= 300),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz NULL,
    CHECK ((state = 'running') = (finished_at IS NULL)),
    CHECK ((cursor_occurred_at IS NULL) = (cursor_event_id IS NULL))
);
CREATE UNIQUE INDEX outbox_operation_key_idx ON outbox_operation (coalesce(company_id, ''), idempotency_key_hash);
-- The runners' walk: running jobs, least recently worked first.
CREATE INDEX outbox_operation_running_idx ON outbox_operation (updated_at) WHERE state = 'running';
