-- The jobs: one row per (tenant, job), written when a scheduler that declares
-- the job first owns its partition. last_nominal is the persisted last
-- nominal time: catch-up always starts after it, never from memory.
CREATE TABLE {{jobs}} (
    tenant          text        NOT NULL,
    job             text        NOT NULL,
    cron            text        NOT NULL,
    every_ms        bigint      NOT NULL,
    zone            text        NOT NULL,
    gap             text        NOT NULL,
    fold            text        NOT NULL,
    catch_up        text        NOT NULL,
    max_catch_up    integer     NOT NULL,
    window_ms       bigint      NOT NULL,
    overlap         text        NOT NULL,
    paused          boolean     NOT NULL DEFAULT false,
    last_nominal    timestamptz NOT NULL,
    last_local      timestamp,
    last_fold       smallint,
    last_outcome    text,
    last_fire_at    timestamptz,
    last_success_at timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, job)
);
-- A fire's record: one row per identity (tenant, job, local wall-clock time,
-- fold), written in the fire's own transaction. outcome: ok, running (a
-- multi-batch run not finished), failed, missed (reason says why), skipped
-- (an operator's SkipNext).
CREATE TABLE {{fires}} (
    tenant      text        NOT NULL,
    job         text        NOT NULL,
    local_time  timestamp   NOT NULL,
    fold        smallint    NOT NULL,
    nominal     timestamptz NOT NULL,
    kind        text        NOT NULL,
    outcome     text        NOT NULL,
    reason      text,
    token       text,
    batches     integer     NOT NULL DEFAULT 0,
    cursor      bytea,
    attempts    integer     NOT NULL DEFAULT 0,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (tenant, job, local_time, fold)
);
CREATE INDEX {{idx_running}} ON {{fires}} (tenant, job) WHERE outcome = 'running';
-- Operators' requests a job's owner carries out: trigger (a fire now) and
-- backfill (the fires of a range).
CREATE TABLE {{requests}} (
    id          bigserial   PRIMARY KEY,
    tenant      text        NOT NULL,
    job         text        NOT NULL,
    kind        text        NOT NULL,
    at          timestamptz NOT NULL,
    range_to    timestamptz,
    actor       text        NOT NULL,
    reason      text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    done_at     timestamptz,
    result      text
);
CREATE INDEX {{idx_pending}} ON {{requests}} (tenant, job) WHERE done_at IS NULL;
-- Every operator verb, with who, why and what it changed.
CREATE TABLE {{audit}} (
    id       bigserial   PRIMARY KEY,
    at       timestamptz NOT NULL DEFAULT now(),
    tenant   text        NOT NULL,
    job      text        NOT NULL,
    verb     text        NOT NULL,
    actor    text        NOT NULL,
    db_user  text        NOT NULL DEFAULT current_user,
    reason   text        NOT NULL,
    detail   text        NOT NULL
);
