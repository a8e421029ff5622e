-- online: yes
-- An event that finishes releases the parked head of its aggregate (correctness review F8).
--
-- The claim walks due events in next_attempt_at order and skips those an earlier event of
-- their aggregate holds back. Behind one REVIEW_REQUIRED event with 200,000 successors each
-- claim, on every host, read all 200,000 before it reached claimable work (3.2 s and 607,000
-- buffers measured, against 0.9 ms without them). Hosts of this release now park such
-- successors: a background pass sets next_attempt_at = 'infinity' on PENDING events that
-- have waited behind an unfinished earlier event of their aggregate, so the claim's walk
-- (next_attempt_at <= now()) never reaches them. The claim's ordering check is unchanged:
-- parking saves reading, it never decides order.
--
-- This trigger unparks. When a keyed event becomes COMPLETED or DISCARDED (an outcome, the
-- fence of a handler's transaction, an operator's discard or cancel, from a host of any
-- release), or an unfinished keyed event is deleted, the first unfinished event of its
-- aggregate is due again at its original time (greatest(occurred_at, deliver_after)) if it
-- was parked. Its successors stay parked: it holds them back.
--
-- No parked event is left behind by a race with the parking pass: the pass parks an event
-- only while it holds a FOR SHARE lock on an unfinished earlier event of the aggregate, so
-- that event's finishing update waits for the pass to commit, and this trigger's query
-- (a new snapshot: each statement of a VOLATILE function takes one) then sees the parked
-- event. Two events of one aggregate finishing at the same moment (an operator discarding a
-- waiting event while the head completes) can each miss the other's change; hosts sweep
-- parked heads every rescue interval (event_publication_parked_idx, V21) for that case.
--
-- SECURITY DEFINER with a pinned search_path: the update is the owner's, whichever role
-- finished the event (the runtime role, or a handler's role through outbox_fence()).
--
-- Online: CREATE TRIGGER takes a SHARE ROW EXCLUSIVE lock on event_publication for an
-- instant; lock_timeout makes the migration fail (and be run again) rather than queue every
-- claim behind a long transaction. Hosts of 0.2.0 keep working beside this: they never park,
-- their outcomes fire the trigger like anyone's, and their claims skip parked events as
-- they skip delayed ones. The 'infinity' of a parked event is what they show as its
-- next_attempt_at until their host is upgraded.
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION outbox_release_parked_head() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_publication h
    SET next_attempt_at = greatest(h.occurred_at, h.deliver_after)
    WHERE h.event_id = (SELECT f.event_id FROM event_publication f
                        WHERE f.company_id = OLD.company_id AND f.aggregate_key = OLD.aggregate_key
                          AND f.aggregate_seq IS NOT NULL
                          AND f.status IN ('PENDING', 'PROCESSING', 'RETRY_WAIT', 'REVIEW_REQUIRED')
                        ORDER BY f.aggregate_seq
                        LIMIT 1)
      AND h.status = 'PENDING' AND h.next_attempt_at = 'infinity';
    RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION outbox_release_parked_head() FROM PUBLIC;

CREATE TRIGGER event_publication_finished_releases_parked
    AFTER UPDATE OF status ON event_publication
    FOR EACH ROW
    WHEN (NEW.aggregate_seq IS NOT NULL AND NEW.status IN ('COMPLETED', 'DISCARDED')
          AND OLD.status NOT IN ('COMPLETED', 'DISCARDED'))
    EXECUTE FUNCTION outbox_release_parked_head();

CREATE TRIGGER event_publication_deleted_releases_parked
    AFTER DELETE ON event_publication
    FOR EACH ROW
    WHEN (OLD.aggregate_seq IS NOT NULL AND OLD.status NOT IN ('COMPLETED', 'DISCARDED'))
    EXECUTE FUNCTION outbox_release_parked_head();
