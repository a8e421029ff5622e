-- What outboxd sends for one event of the writing handler (bench_write.cpp), captured with
-- log_statement = all, one line per round trip; the events were claimed beforehand (outboxd
-- claims 20 at a time). The first round trip also picks the next claimed event (a read of
-- bench_claimed), which outboxd has from its claim. pgbench sends the INSERT unprepared
-- (outboxd prepares it). The fence completes the event in its first attempt: no
-- consumption rows (the empty array).
BEGIN \; SET LOCAL statement_timeout = 7500 \; SELECT event_id AS ev, lease_token AS tok FROM bench_claimed WHERE seq = (SELECT nextval('bench_claimed_seq')) \gset
INSERT INTO bench_effect (event_id) VALUES (':ev'::uuid) ON CONFLICT DO NOTHING;
SELECT outbox_fence(':ev'::uuid, ':tok'::uuid, '{}'::text[], true) \; COMMIT;
