-- coordctl's audit trail: one row per mutation an operator asked for, applied or
-- refused because the state had moved on since it was shown (outcome 'conflict').
-- The table name is the configured one, validated and quoted.
CREATE TABLE {{audit}} (
    id       bigserial   PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor    text        NOT NULL,  -- who asked (--actor, the console's identity)
    via      text        NOT NULL,  -- 'cli', or 'console' and the client's address
    db_user  text        NOT NULL DEFAULT current_user,
    action   text        NOT NULL,  -- 'saga.retry', 'outbox.requeue', 'fence.reset', ...
    target   text        NOT NULL,  -- the saga id, event id, lease
    reason   text        NOT NULL,
    outcome  text        NOT NULL CHECK (outcome IN ('applied', 'conflict')),
    before   jsonb       NOT NULL,  -- the state the operator acted on (applied) or saw (conflict)
    after    jsonb                  -- the state after (applied), or what it had become (conflict)
);
CREATE INDEX {{target_idx}} ON {{audit}} (target, id);
