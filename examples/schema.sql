-- The example application's own tables. They belong to the application, not to outboxd:
-- the category-classification plugin writes website.category, and each
-- user_mission_completion row is published as a MissionCompleted event in the same
-- transaction. Safe to run again.

CREATE TABLE IF NOT EXISTS website (
    id       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    domain   text UNIQUE NOT NULL,
    category text  -- NULL until classified; the plugin never overwrites a value
);

CREATE TABLE IF NOT EXISTS user_mission_completion (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      text NOT NULL,
    mission_id   text NOT NULL,
    solar_term   text NOT NULL,
    completed_at timestamptz NOT NULL DEFAULT now()
);
