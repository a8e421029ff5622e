-- Handler threads a host abandoned past their deadline and that have not returned yet, as
-- each host last reported them (`outboxd status`, GET /api/v1/admin/fleet).
-- Online: a column with a constant default is added without rewriting the (small) table,
-- and hosts of earlier releases, which do not name it, keep writing their rows.
ALTER TABLE outbox_host ADD COLUMN abandoned_threads integer NOT NULL DEFAULT 0;
