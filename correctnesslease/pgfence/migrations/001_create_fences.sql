-- The fence table: the highest fencing token each lease has presented.
-- The table name is the configured one, validated and quoted.
CREATE TABLE {{table}} (
    lease      text        PRIMARY KEY,
    revision   bigint      NOT NULL CHECK (revision > 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
