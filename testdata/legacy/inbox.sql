-- The inbox: one row per (consumer, event id) processed, written in the same
-- transaction as the consumer's effect.
CREATE TABLE IF NOT EXISTS {{table}} (
    consumer     text        NOT NULL,
    event_id     text        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (consumer, event_id)
);
CREATE INDEX IF NOT EXISTS {{idx_processed}} ON {{table}} (processed_at);
