-- online: yes
-- Circuit breakers (flow control item 5): a handler whose calls keep failing is paused on
-- every host by the breaker, which probes it after a cool-down and resumes it when a probe
-- succeeds.
--
-- The breaker's pause is the operators' pause, a row of outbox_handler_pause, with
-- paused_by = 'circuit-breaker'; every host already stops claiming for it and hears of it
-- through NOTIFY. The new columns coordinate the probe between hosts, and are NULL on an
-- operator's pause (which the breaker never touches):
--   probe_after       the cool-down's end: no probe starts before it
--   probe_owner       the host running the probe (NULL: none)
--   probe_token       the probe's fencing token: only its host's verdict applies
--   probe_expires_at  when a probe whose host died or lost track of it may be taken over
-- A host takes the probe with one fenced UPDATE (probe_after and probe_expires_at passed),
-- so two hosts never probe at once, and a host that dies mid-probe holds it only until
-- probe_expires_at.
--
-- Online: nullable columns without a default are added without rewriting the table (a few
-- rows at most) under an instant lock, bounded by lock_timeout. Hosts of 0.2.0 never name
-- the columns: they treat a breaker's pause as any pause (they neither open breakers nor
-- probe). The runtime role gets UPDATE on the table at this migrate (the probe and its
-- verdict update the row).
SET LOCAL lock_timeout = '5s';

ALTER TABLE outbox_handler_pause
    ADD COLUMN probe_after      timestamptz NULL,
    ADD COLUMN probe_owner      text        NULL CHECK (length(probe_owner) BETWEEN 1 AND 200),
    ADD COLUMN probe_token      uuid        NULL,
    ADD COLUMN probe_expires_at timestamptz NULL;
