-- The outbox. Column names follow Debezium's outbox event router (id,
-- aggregatetype, aggregateid, type, payload) so CDC can replace the polling relay.
CREATE TABLE IF NOT EXISTS {{table}} (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              uuid        NOT NULL,
    aggregatetype   text        NOT NULL,
    aggregateid     text        NOT NULL,
    type            text        NOT NULL,
    payload         text        NOT NULL,
    payload_json    boolean     NOT NULL DEFAULT false,
    headers         jsonb       NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    last_error      text,
    published_at    timestamptz
);
-- Relays scan pending rows in seq order, then claim per key.
CREATE INDEX IF NOT EXISTS {{idx_pending}} ON {{table}} (seq) WHERE published_at IS NULL;
CREATE INDEX IF NOT EXISTS {{idx_key}} ON {{table}} (aggregateid, seq) WHERE published_at IS NULL;
-- Keys whose head is waiting for a retry (rare; small).
CREATE INDEX IF NOT EXISTS {{idx_retry}} ON {{table}} (aggregateid) WHERE published_at IS NULL AND attempts > 0;
-- Pruning of published rows.
CREATE INDEX IF NOT EXISTS {{idx_published}} ON {{table}} (published_at) WHERE published_at IS NOT NULL;

-- Parked (dead-lettered) events. While a key has a row here, no later event of
-- that key is published.
CREATE TABLE IF NOT EXISTS {{dead}} (
    id              uuid        PRIMARY KEY,
    seq             bigint      NOT NULL,
    aggregatetype   text        NOT NULL,
    aggregateid     text        NOT NULL,
    type            text        NOT NULL,
    payload         text        NOT NULL,
    payload_json    boolean     NOT NULL DEFAULT false,
    headers         jsonb       NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL,
    attempts        integer     NOT NULL,
    last_error      text,
    parked_at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS {{idx_dead_key}} ON {{dead}} (aggregateid);
