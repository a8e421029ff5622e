-- online: yes
-- Every host process has an incarnation of its own (correctness review F5).
--
-- A lease names its host by outbox.host_id, which two live processes can share: an id set
-- in a shared configuration, or the default `<hostname>:<pid>` in PID namespaces, where every
-- replica is `node:1`. The release of untracked leases (claims or outcomes lost with a
-- connection) recognised "this process" by that id alone, so each of two such processes gave
-- the other's running events back, and they ran again beside themselves. Now a claim records
-- the process's incarnation (a random id drawn at start) beside its host_id, the release
-- matches both, and a host refuses to start while a live process heartbeats under its id
-- (outbox_host.incarnation tells them apart).
--   event_publication.lease_incarnation  the claiming process's incarnation (NULL: released,
--                                         or claimed by a host of a release before this one)
--   outbox_host.incarnation               the incarnation of the process that writes the row
-- Online: nullable columns without a default are added without rewriting either table; hosts
-- of 0.2.0 name their columns and keep working (their claims leave lease_incarnation NULL,
-- which no release of this process matches). The brief exclusive lock each ADD COLUMN takes
-- waits behind running claims; lock_timeout makes the migration fail (and be run again)
-- rather than queue every claim behind it.
SET LOCAL lock_timeout = '5s';
ALTER TABLE event_publication ADD COLUMN lease_incarnation text;
ALTER TABLE outbox_host ADD COLUMN incarnation text;
