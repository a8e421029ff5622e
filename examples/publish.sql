-- What outbox-example-app does, in plain SQL (any language can do this): each business row
-- and the event that must follow it are written in ONE transaction, so the event exists if
-- and only if the row does. Needs examples/schema.sql and `outboxd migrate`.
--   psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -f examples/publish.sql

-- Register a website. The upsert returns the existing id when the domain is already there
-- (or is being inserted by a concurrent transaction, which it waits for); dedup_key =
-- website_id then makes every registration of the domain share ONE WebsiteRegistered
-- event, i.e. one classification job.
BEGIN;
WITH site AS (
    INSERT INTO website (domain) VALUES ('example.com')
    ON CONFLICT (domain) DO UPDATE SET domain = EXCLUDED.domain
    RETURNING id, domain
)
SELECT outbox_publish('acme', 'WebsiteRegistered',
                      jsonb_build_object('website_id', id, 'domain', domain),
                      NULL,       -- aggregate_key
                      id::text)   -- dedup_key
       AS event_id
FROM site;
COMMIT;

-- Complete a mission. The payload carries identifiers only (never names, e-mail addresses
-- or phone numbers), here numeric ids published as JSON numbers; aggregate_key groups a
-- user's events for operators.
BEGIN;
WITH completion AS (
    INSERT INTO user_mission_completion (user_id, mission_id, solar_term)
    VALUES (1, 7, 'CHUNBUN')
    RETURNING id, user_id, mission_id, solar_term
)
SELECT outbox_publish('acme', 'MissionCompleted',
                      jsonb_build_object('completion_id', id, 'user_id', user_id,
                                         'mission_id', mission_id, 'solar_term', solar_term),
                      user_id::text)    -- aggregate_key
       AS event_id
FROM completion;
COMMIT;
