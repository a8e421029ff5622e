-- The fleet registry: every outboxd host records itself and the handlers it serves, so
-- operators can see which host runs what and spot hosts that disagree (an event completes
-- when the handlers of the host that processed it are done).
CREATE TABLE outbox_host (
    host_id               text        PRIMARY KEY CHECK (length(host_id) BETWEEN 1 AND 200),
    version               text        NOT NULL,
    started_at            timestamptz NOT NULL,
    last_heartbeat_at     timestamptz NOT NULL DEFAULT now(),
    heartbeat_interval_ms integer     NOT NULL CHECK (heartbeat_interval_ms > 0),
    stopped_at            timestamptz NULL,  -- set by a clean shutdown
    enabled               boolean     NOT NULL,
    -- [{"handler": ..., "event_types": [...], "file": ..., "abi": ...}, ...]
    handlers              jsonb       NOT NULL DEFAULT '[]'::jsonb CHECK (jsonb_typeof(handlers) = 'array')
);
