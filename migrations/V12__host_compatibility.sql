-- online: yes
-- Rolling upgrades: hosts record which schema they need, and the schema history records
-- which hosts stay compatible after each migration.
--   outbox_host.schema_needed         the highest migration the host's release uses
--                                     (0: a release before this one, which does not say)
--   outbox_host.schema_supported_max  the newest schema the host checked and accepted at start
--   outbox_schema_history.compatible_with_hosts_from
--                                     from the file's `compatible-with-hosts-from` header: after
--                                     it, hosts that need an older schema refuse to start
-- Online: columns with constant defaults are added without rewriting the (small) tables;
-- hosts of earlier releases name their columns and keep writing their rows.
ALTER TABLE outbox_host ADD COLUMN schema_needed integer NOT NULL DEFAULT 0;
ALTER TABLE outbox_host ADD COLUMN schema_supported_max integer NULL;
ALTER TABLE outbox_schema_history ADD COLUMN compatible_with_hosts_from integer NULL;
