package saga

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtx"
)

//go:embed migrations
var migrations embed.FS

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (sqlc's name: Exec,
// Query, QueryRow). Single statements and reads take one.
type DBTX = pgtx.DBTX

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint). A call that runs its own transaction takes one.
type Beginner = pgtx.Beginner

// Querier is DBTX.
//
// Deprecated: use DBTX.
type Querier = DBTX

// sagaComponent is the versioned schema of the saga table.
func sagaComponent(schema, table string) (pgschema.Component, error) {
	c := pgschema.Component{Owner: "saga", Kind: "saga", Schema: schema, Name: table}
	return c.LoadMigrations(migrations, "migrations/saga", map[string]string{
		"sagas":                       pgschema.Qualified(schema, table),
		"due_idx":                     pgschema.Quoted(table + dueIdx.Suffix),
		"state_idx":                   pgschema.Quoted(table + stateIdx.Suffix),
		"list_idx":                    pgschema.Quoted(table + listIdx.Suffix),
		"state_list_idx":              pgschema.Quoted(table + stateList.Suffix),
		"no_compensation_after_pivot": pgschema.Quoted(table + noCompCheck.Suffix),
	})
}

// barrierComponent is the versioned schema of the barrier table.
func barrierComponent(schema, table string) (pgschema.Component, error) {
	c := pgschema.Component{Owner: "saga", Kind: "saga_barrier", Schema: schema, Name: table}
	return c.LoadMigrations(migrations, "migrations/barrier", map[string]string{"barrier": pgschema.Qualified(schema, table)})
}

// Migrate brings the client's saga table to the newest schema version, in a
// transaction of its own (see MigrateTx). Safe to call from every process on every
// start: it blocks while another caller migrates the same schema; ctx cancels it.
// db may differ from the client's pool (a role allowed to run DDL). The barrier
// table is a participant's and has its own [Barrier.Migrate].
func (c *Client) Migrate(ctx context.Context, db Beginner) error { return c.schema.Migrate(ctx, db) }

// MigrateTx applies the pending schema versions in the caller's transaction tx
// (READ COMMITTED) and records them in the schema's coordkit_migrations table. It
// takes a transaction-scoped advisory lock on the schema, held until tx ends, so
// concurrent migrations run one after another. On error, roll tx back.
func (c *Client) MigrateTx(ctx context.Context, tx pgx.Tx) error { return c.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the saga table's schema as plain SQL for goose,
// golang-migrate or atlas: one element per version, in order, each recording
// itself in coordkit_migrations so that Migrate and SchemaVersion agree with the
// external tool.
func (c *Client) MigrationSQL() []string { return c.schema.SQL() }

// SchemaVersion returns the schema version recorded in the database (0 before the
// first migration) and the newest version this code ships. applied < latest means
// Migrate has work to do; applied > latest, that a newer release migrated it.
func (c *Client) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return c.schema.Version(ctx, db)
}

// Migrate brings the barrier table to the newest schema version, in a transaction
// of its own; see Client.Migrate.
func (b *Barrier) Migrate(ctx context.Context, db Beginner) error { return b.schema.Migrate(ctx, db) }

// MigrateTx applies the barrier's pending schema versions in tx; see
// Client.MigrateTx.
func (b *Barrier) MigrateTx(ctx context.Context, tx pgx.Tx) error { return b.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the barrier schema as plain SQL; see Client.MigrationSQL.
func (b *Barrier) MigrationSQL() []string { return b.schema.SQL() }

// SchemaVersion returns the barrier's recorded and newest schema versions; see
// Client.SchemaVersion.
func (b *Barrier) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return b.schema.Version(ctx, db)
}
