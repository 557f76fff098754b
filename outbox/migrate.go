package outbox

import (
	"context"
	"embed"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
)

//go:embed migrations
var migrations embed.FS

// outboxComponent is the versioned schema of the outbox table and its
// dead-letter table.
func outboxComponent(cfg Config) (pgschema.Component, error) {
	c := pgschema.Component{Owner: "outbox", Kind: "outbox", Schema: cfg.Schema, Name: cfg.Table}
	return c.LoadMigrations(migrations, "migrations/outbox", map[string]string{
		"table":             pgschema.Qualified(cfg.Schema, cfg.Table),
		"dead":              pgschema.Qualified(cfg.Schema, cfg.DeadLetterTable),
		"idx_pending":       pgschema.Quoted(cfg.Table + pendingIdx.Suffix),
		"idx_key":           pgschema.Quoted(cfg.Table + keyIdx.Suffix),
		"idx_retry":         pgschema.Quoted(cfg.Table + retryIdx.Suffix),
		"idx_published":     pgschema.Quoted(cfg.Table + publishedIdx.Suffix),
		"idx_dead_key":      pgschema.Quoted(cfg.DeadLetterTable + keyIdx.Suffix),
		"idx_dead_seq":      pgschema.Quoted(cfg.DeadLetterTable + seqIdx.Suffix),
		"idx_dead_key_time": pgschema.Quoted(cfg.DeadLetterTable + keyTimeIdx.Suffix),
	})
}

// inboxComponent is the versioned schema of the inbox table.
func inboxComponent(cfg InboxConfig) (pgschema.Component, error) {
	c := pgschema.Component{Owner: "outbox", Kind: "inbox", Schema: cfg.Schema, Name: cfg.Table}
	return c.LoadMigrations(migrations, "migrations/inbox", map[string]string{
		"table":         pgschema.Qualified(cfg.Schema, cfg.Table),
		"idx_processed": pgschema.Quoted(cfg.Table + processedIdx.Suffix),
	})
}

// Migrate brings the outbox and dead-letter tables and their indexes to the newest
// schema version, in a transaction of its own (see MigrateTx). Safe to call from
// every process on every start: it blocks while another caller migrates the same
// schema; ctx cancels it.
func (o *Outbox) Migrate(ctx context.Context, db Beginner) error { return o.schema.Migrate(ctx, db) }

// MigrateTx applies the pending schema versions in the caller's transaction tx
// (READ COMMITTED) and records them in the schema's coordkit_migrations table. It
// takes a transaction-scoped advisory lock on the schema, held until tx ends, so
// concurrent migrations run one after another. On error, roll tx back.
func (o *Outbox) MigrateTx(ctx context.Context, tx pgx.Tx) error { return o.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the schema as plain SQL for goose, golang-migrate or atlas:
// one element per version, in order, each recording itself in coordkit_migrations
// so that Migrate and SchemaVersion agree with the external tool.
func (o *Outbox) MigrationSQL() []string { return o.schema.SQL() }

// SchemaVersion returns the schema version recorded in the database (0 before the
// first migration) and the newest version this code ships. applied < latest means
// Migrate has work to do; applied > latest, that a newer release migrated it.
func (o *Outbox) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return o.schema.Version(ctx, db)
}

// Migrate brings the inbox table to the newest schema version, in a transaction of
// its own; see Outbox.Migrate.
func (in *Inbox) Migrate(ctx context.Context, db Beginner) error { return in.schema.Migrate(ctx, db) }

// MigrateTx applies the inbox's pending schema versions in tx; see
// Outbox.MigrateTx.
func (in *Inbox) MigrateTx(ctx context.Context, tx pgx.Tx) error { return in.schema.MigrateTx(ctx, tx) }

// MigrationSQL returns the inbox schema as plain SQL; see Outbox.MigrationSQL.
func (in *Inbox) MigrationSQL() []string { return in.schema.SQL() }

// SchemaVersion returns the inbox's recorded and newest schema versions; see
// Outbox.SchemaVersion.
func (in *Inbox) SchemaVersion(ctx context.Context, db DBTX) (applied, latest int, err error) {
	return in.schema.Version(ctx, db)
}
