-- saga instances: one row per saga, written after every step.
CREATE TABLE IF NOT EXISTS {{sagas}} (
    id              text        PRIMARY KEY,
    saga_type       text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('running', 'compensating', 'completed', 'compensated', 'needs_human')),
    step            integer     NOT NULL,  -- running: next step to run; compensating: next step to undo
    pivot_step      integer     NOT NULL,
    step_count      integer     NOT NULL,
    data            jsonb       NOT NULL,
    outputs         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    attempts        integer     NOT NULL DEFAULT 0,  -- failed attempts of the current step or compensation
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    errors          jsonb       NOT NULL DEFAULT '[]'::jsonb,  -- the last 20 errors
    failure         text,        -- the business failure that started compensation
    claim_owner     text,
    claim_until     timestamptz,
    claim_version   bigint      NOT NULL DEFAULT 0,  -- fence: bumped by every claim
    paged_at        timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    state_since     timestamptz NOT NULL DEFAULT now(),
    pivot_at        timestamptz,
    finished_at     timestamptz,
    -- The runtime refuses to compensate after the pivot; so does the table.
    CONSTRAINT {{no_compensation_after_pivot}} CHECK (state <> 'compensating' OR step < pivot_step)
) WITH (fillfactor = 70);  -- room for HOT updates: a step write changes no indexed column
CREATE INDEX IF NOT EXISTS {{due_idx}} ON {{sagas}} (next_attempt_at) WHERE state IN ('running', 'compensating');
CREATE INDEX IF NOT EXISTS {{state_idx}} ON {{sagas}} (saga_type, state, state_since);
