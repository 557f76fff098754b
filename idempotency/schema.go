package idempotency

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (sqlc's name: Exec,
// Query, QueryRow). Single statements and reads take one.
type DBTX = pgtx.DBTX

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint). A call that runs its own transaction takes one.
type Beginner = pgtx.Beginner

// Execer is DBTX.
//
// Deprecated: use DBTX.
type Execer = DBTX

// Querier is DBTX.
//
// Deprecated: use DBTX.
type Querier = DBTX

// component is the key table's versioned schema.
func component(cfg Config) (pgschema.Component, error) {
	c := pgschema.Component{Owner: "idempotency", Kind: "idempotency", Schema: cfg.Schema, Name: cfg.Table}
	return c.LoadMigrations(migrations, "migrations", map[string]string{
		"table":         pgschema.Qualified(cfg.Schema, cfg.Table),
		"created_idx":   pgschema.Quoted(cfg.Table + createdIdx.Suffix),
		"abandoned_idx": pgschema.Quoted(cfg.Table + abandonedIdx.Suffix),
	})
}

// Migrate brings the key table and its indexes to the newest schema version, in a
// transaction of its own (see MigrateTx). Safe to call from every process on every
// start: it blocks while another caller migrates the same schema; ctx cancels it.
// db may differ from the Store's pool (a role allowed to run DDL).
func (s *Store) Migrate(ctx context.Context, db Beginner) error { return s.schema.Migrate(ctx, db) }

// MigrateTx applies the pending schema versions in the caller's transaction tx
// (READ COMMITTED) and records them in the schema's coordkit_migrations table. It
// takes a transaction-scoped advisory lock on the schema, held until tx ends, so
// concurrent migrations run one after another. On error, roll tx back.
func (s *Store) MigrateTx(ctx context.Context, tx pgx.Tx) error { return s.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the schema as plain SQL for goose, golang-migrate or atlas:
// one element per version, in order, each recording itself in coordkit_migrations
// so that Migrate and SchemaVersion agree with the external tool.
func (s *Store) MigrationSQL() []string { return s.schema.SQL() }

// SchemaVersion returns the schema version recorded in the database (0 before the
// first migration) and the newest version this code ships. applied < latest means
// Migrate has work to do; applied > latest, that a newer release migrated it.
func (s *Store) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return s.schema.Version(ctx, db)
}
