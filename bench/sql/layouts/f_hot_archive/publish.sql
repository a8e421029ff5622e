\set n random(1, 1000000)
SELECT lay_publish('bench', 'BenchNoop', jsonb_build_object('n', :n::int));
