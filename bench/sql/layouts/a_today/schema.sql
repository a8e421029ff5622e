-- (a) Today's layout (migrations up to V20): event_publication is the queue and the
-- history; nothing to add.
SELECT 1;
