-- Retention: whole partitions of the history whose range holds no unfinished event.
SELECT lay_drop_partitions('event_history', 'event_publication', now() + interval '4 hours');
