-- online: yes
-- The fleet limiter's functions bound their own lock waits (correctness review F1).
--
-- outbox_take_handler_slot (V8), outbox_try_acquire_call_slot (V6/V8, what hosts of 0.1.0
-- call) and outbox_reserve_call_slot (V2) each wait for one lock every caller of the same
-- handler shares: the advisory lock (key, -1) or the handler's throttle row. A host that
-- freezes while it holds that lock (0.1.0 holds it across BEGIN, the call and COMMIT; SIGSTOP,
-- a paused VM or a silent network path) used to queue every other host's call behind it for
-- as long as the freeze lasted, each in a backend of its own: the handler stalled fleet-wide
-- and the queued backends grew towards max_connections. Now each of these calls gives up
-- after 2 seconds with SQLSTATE 55P03, the caller's host waits for a released slot (or its
-- poll, 1 s) and asks again on the same connection, and the number of waiting backends stays
-- at most one per worker of the handler. A function-level SET holds behind a transaction-mode
-- pooler too: it is the function's, not the session's. (A function-level statement_timeout
-- would not: the server arms that timer once per top-level statement, so hosts set
-- statement_timeout on their limiter connections instead.)
--
-- Normal holders keep these locks for microseconds, so 2 seconds is never reached without a
-- frozen holder. A later CREATE OR REPLACE of any of these functions must repeat the SET.
--
-- Online: ALTER FUNCTION takes no table lock, signatures and grants are unchanged, and hosts
-- of every earlier release call the functions as before.
ALTER FUNCTION outbox_take_handler_slot(text, integer, text, interval) SET lock_timeout = '2s';
ALTER FUNCTION outbox_try_acquire_call_slot(integer, integer, integer[]) SET lock_timeout = '2s';
ALTER FUNCTION outbox_reserve_call_slot(text, interval, interval) SET lock_timeout = '2s';
