// Package pgschema is the one Postgres schema layer of coordkit: every package that
// owns tables (pgfence, idempotency, outbox and its inbox, saga and its barrier)
// describes them as a [Component] — a kind, an instance name and an ordered list of
// versioned migrations — and applies them through it.
//
// Versions are recorded per component instance in the table coordkit_migrations of
// the component's schema (VersionTable): one row per applied version, so a tool can
// tell which version a schema is at ([Component.Applied]) and the next migration
// (002_*.sql, an ALTER TABLE) has somewhere to go. [Component.MigrateTx] applies the
// pending versions under a transaction-scoped advisory lock keyed by the schema, so
// any number of processes may call it at once: the first applies, the others wait
// for it and find nothing left to do. [Component.SQL] renders the same migrations,
// bookkeeping included, for teams that run goose, golang-migrate or atlas.
//
// The identifier rule every table, schema and derived name follows lives here too
// ([CheckIdent], [Table]), so there is one rule and one limit: PostgreSQL's 63 bytes.
package pgschema
