SELECT lay_drop_partitions('event_outcome', 'event_queue', now() + interval '4 hours'),
       lay_drop_partitions('event_store', 'event_queue', now() + interval '4 hours');
