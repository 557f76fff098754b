package pgfence

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// component is the fence table's versioned schema.
func component(schema, table string) (pgschema.Component, error) {
	ms, err := pgschema.Load(migrationFS, "migrations", map[string]string{
		"table": pgschema.Qualified(schema, table),
		"audit": pgschema.Qualified(schema, table+auditTable.Suffix),
	})
	if err != nil {
		return pgschema.Component{}, fmt.Errorf("pgfence: %w", err)
	}
	return pgschema.Component{Owner: "pgfence", Kind: "pgfence", Schema: schema, Name: table, Migrations: ms}, nil
}

// Migrate brings the fence table to the newest schema version, in a transaction of
// its own (see MigrateTx). Safe to call from every process on every start: it
// blocks while another caller migrates the same schema, and ctx cancels it.
func (f *Fence) Migrate(ctx context.Context, db Beginner) error { return f.schema.Migrate(ctx, db) }

// MigrateTx applies the pending schema versions in the caller's transaction tx
// (READ COMMITTED) and records them in the schema's coordkit_migrations table. It
// takes a transaction-scoped advisory lock on the schema, held until tx ends, so
// concurrent migrations run one after another. On error, roll tx back.
func (f *Fence) MigrateTx(ctx context.Context, tx pgx.Tx) error { return f.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the schema as plain SQL for goose, golang-migrate or atlas:
// one element per version, in order, each recording itself in coordkit_migrations
// so that Migrate and SchemaVersion agree with the external tool. The configured
// names are quoted in.
func (f *Fence) MigrationSQL() []string { return f.schema.SQL() }

// SchemaVersion returns the schema version recorded in the database (0 before the
// first migration) and the newest version this code ships. applied < latest means
// Migrate has work to do; applied > latest, that a newer release migrated it.
func (f *Fence) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return f.schema.Version(ctx, db)
}
