-- The fence table: the highest fencing token each lease has presented.
-- {{table}} is replaced by the configured, validated, quoted table name.
CREATE TABLE IF NOT EXISTS {{table}} (
    lease      text        PRIMARY KEY,
    revision   bigint      NOT NULL CHECK (revision > 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);
