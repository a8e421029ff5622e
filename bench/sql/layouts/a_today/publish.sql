-- One event per transaction through the real outbox_publish (migrations/V19).
\set n random(1, 1000000)
SELECT outbox_publish('bench', 'BenchNoop', jsonb_build_object('n', :n::int));
