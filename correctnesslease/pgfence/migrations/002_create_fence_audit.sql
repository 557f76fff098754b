-- The audit trail of operator resets of fence rows (Fence.ResetFence): who, when,
-- why, and the recorded revision before and after (0: no row). The table name is
-- the fence table's name with "_audit" appended, validated and quoted.
CREATE TABLE {{audit}} (
    id              bigserial   PRIMARY KEY,
    lease           text        NOT NULL,
    actor           text        NOT NULL,
    reason          text        NOT NULL,
    revision_before bigint      NOT NULL,
    revision_after  bigint      NOT NULL,
    db_user         text        NOT NULL DEFAULT current_user,
    reset_at        timestamptz NOT NULL DEFAULT now()
);
