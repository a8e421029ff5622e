-- Events whose previous host died mid-attempt (rescued with code WORKER_LOST) are suspects:
-- one of them may be a poison event that crashes the process. Hosts run suspects alone, so
-- this partial index lets them find due suspects without scanning the due queue.
CREATE INDEX event_publication_suspect_idx ON event_publication (next_attempt_at)
    WHERE status = 'RETRY_WAIT' AND last_error_code = 'WORKER_LOST';
