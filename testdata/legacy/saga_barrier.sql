-- participant-side barrier: one row per (saga id, step, op) that ran.
CREATE TABLE IF NOT EXISTS {{barrier}} (
    saga_id    text        NOT NULL,
    step       text        NOT NULL,
    op         text        NOT NULL CHECK (op IN ('action', 'compensate')),
    reason     text        NOT NULL CHECK (reason IN ('action', 'compensate')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (saga_id, step, op)
);
