-- Idempotency keys: one row per (scope, key). {{table}} and the index names are
-- substituted with identifiers quoted by pgx.Identifier.
CREATE TABLE IF NOT EXISTS {{table}} (
    scope           text        NOT NULL,  -- tenant / principal the key belongs to
    idem_key        text        NOT NULL,  -- the client's Idempotency-Key
    fingerprint     bytea       NOT NULL,  -- SHA-256 of the canonical request
    status          smallint    NOT NULL,  -- 1 in progress, 2 completed
    operation       text        NOT NULL DEFAULT '',        -- phased operation name, '' for one-shot
    recovery_point  text        NOT NULL DEFAULT 'started', -- last committed phase
    recovery_data   bytea,                 -- state carried between phases
    request         bytea,                 -- the request a resumed operation needs
    lock_token      bytea,                 -- owner of the in-progress lock
    locked_until    timestamptz,           -- in progress: others wait until then
    response_status integer,
    response_header bytea,                 -- selected headers, JSON
    response_body   bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    PRIMARY KEY (scope, idem_key)
) WITH (fillfactor = 80);
-- Keep the one-shot path cheap: storing the response must be a HOT update (no
-- indexed or predicate column changes, room left on the page), and a one-shot key
-- enters no index but the primary key and a BRIN summary.
-- The pruner finds expired keys through a BRIN index: created_at follows insertion
-- order, and a BRIN index costs next to nothing per insert.
CREATE INDEX IF NOT EXISTS {{created_idx}} ON {{table}} USING brin (created_at);
-- The completer finds abandoned phased keys; one-shot keys (operation '') are not
-- in this index at all.
CREATE INDEX IF NOT EXISTS {{abandoned_idx}} ON {{table}} (locked_until) WHERE operation <> '';
