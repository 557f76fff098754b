-- A bulk change (a requeue of every parked event a filter selects) is one row:
-- rows is how many objects it acted on (NULL for a change of one object).
ALTER TABLE {{audit}} ADD COLUMN rows bigint;
-- The trail is append-only for every role but the table's owner, whose
-- privileges the grants (coordctl migrate --grants ROLE) cannot take away: a
-- trigger refuses UPDATE, DELETE and TRUNCATE to anyone who has not first
-- disabled it (ALTER TABLE, which only the owner may run, and which the server
-- logs with log_statement=ddl).
CREATE FUNCTION {{append_only_fn}}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'coordctl: the audit table is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER {{append_only}} BEFORE UPDATE OR DELETE ON {{audit}}
    FOR EACH ROW EXECUTE FUNCTION {{append_only_fn}}();
CREATE TRIGGER {{append_only_truncate}} BEFORE TRUNCATE ON {{audit}}
    FOR EACH STATEMENT EXECUTE FUNCTION {{append_only_fn}}();
