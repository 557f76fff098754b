package schedule

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (the
// repository's one database vocabulary, internal/pgtx).
type DBTX = pgtx.DBTX

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint).
type Beginner = pgtx.Beginner

// tables are the quoted, schema-qualified names of one Config's tables.
type tables struct {
	jobs, fires, requests, audit string
}

func newTables(schema, table string) tables {
	return tables{
		jobs:     pgschema.Qualified(schema, table),
		fires:    pgschema.Qualified(schema, table+firesTable.Suffix),
		requests: pgschema.Qualified(schema, table+requestsTable.Suffix),
		audit:    pgschema.Qualified(schema, table+auditTable.Suffix),
	}
}

// component is the versioned schema of the four tables.
func component(schema, table string) (pgschema.Component, error) {
	t := newTables(schema, table)
	ms, err := pgschema.Load(migrationFS, "migrations", map[string]string{
		"jobs":        t.jobs,
		"fires":       t.fires,
		"requests":    t.requests,
		"audit":       t.audit,
		"idx_running": pgschema.Quoted(table + runningIdx.Suffix),
		"idx_pending": pgschema.Quoted(table + pendingIdx.Suffix),
	})
	if err != nil {
		return pgschema.Component{}, fmt.Errorf("schedule: %w", err)
	}
	return pgschema.Component{Owner: "schedule", Kind: "schedule", Schema: schema, Name: table, Migrations: ms}, nil
}

// store is the PostgreSQL side shared by a Scheduler and an Admin: the
// schema and the statements over one Config's tables.
type store struct {
	schema pgschema.Component
	t      tables
	sql    statements
}

func newStore(schema, table string) (*store, error) {
	c, err := component(schema, table)
	if err != nil {
		return nil, err
	}
	t := newTables(schema, table)
	return &store{schema: c, t: t, sql: newStatements(t)}, nil
}

// Migrate brings the jobs, fires, requests and audit tables to the newest
// schema version, in a transaction of its own (see MigrateTx). Safe to call
// from every process on every start: it blocks while another caller migrates
// the same schema; ctx cancels it.
func (s *store) Migrate(ctx context.Context, db Beginner) error { return s.schema.Migrate(ctx, db) }

// MigrateTx applies the pending schema versions in the caller's transaction
// tx (READ COMMITTED) and records them in the schema's coordkit_migrations
// table, under a transaction-scoped advisory lock on the schema. On error,
// roll tx back.
func (s *store) MigrateTx(ctx context.Context, tx pgx.Tx) error { return s.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the schema as plain SQL for goose, golang-migrate or
// atlas: one element per version, in order, each recording itself in
// coordkit_migrations.
func (s *store) MigrationSQL() []string { return s.schema.SQL() }

// SchemaVersion returns the schema version recorded in the database (0
// before the first migration) and the newest version this code ships.
func (s *store) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return s.schema.Version(ctx, db)
}
