package pgschema

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgerr"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// VersionTable is the table, in the component's schema, that records every applied
// migration version: (component, name, version, description, applied_at).
const VersionTable = "coordkit_migrations"

// Migration is one version of a component's schema.
type Migration struct {
	Version     int    // 1, 2, ...: contiguous
	Description string // from the file name: "create_fences"
	SQL         string // one or more statements, identifiers already quoted in
}

// Component is one owner of tables in one schema: the outbox "coord_outbox", the
// fence table "coord_fences" in schema "billing".
type Component struct {
	Owner      string // the package, prefixing every error: "outbox"
	Kind       string // what owns the tables: "outbox", "inbox", "pgfence", ...
	Schema     string // the schema holding the tables and VersionTable; "": the search_path's
	Name       string // the instance: its main table's unqualified name
	Migrations []Migration
}

// Beginner starts a transaction (pgtx.Beginner).
type Beginner = pgtx.Beginner

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (pgtx.DBTX).
type DBTX = pgtx.DBTX

// Latest is the newest version the component ships.
func (c Component) Latest() int { return len(c.Migrations) }

// Migrate applies the pending migrations in one transaction of its own: begin,
// MigrateTx, commit. It blocks while another caller migrates the same schema; ctx
// cancels the wait and every statement.
func (c Component) Migrate(ctx context.Context, db Beginner) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return c.fail(fmt.Errorf("migrate %s: begin: %w", c, err))
	}
	defer pgtx.Rollback(ctx, tx)
	if err := c.migrateTx(ctx, tx); err != nil {
		return c.fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return c.fail(fmt.Errorf("migrate %s: commit: %w", c, err))
	}
	return nil
}

// MigrateTx applies, in tx, every migration newer than the version recorded for the
// component, and records each one. It first takes a transaction-scoped advisory
// lock keyed by the schema, held until tx ends, so concurrent callers run one after
// the other and each later one finds the work done. tx must be READ COMMITTED (a
// snapshot taken before the lock could not see what the previous holder committed);
// another isolation level is refused before anything is changed. A schema already
// at a newer version than this code knows is left as it is (nil error). On error,
// roll tx back.
func (c Component) MigrateTx(ctx context.Context, tx pgx.Tx) error {
	return c.fail(c.migrateTx(ctx, tx))
}

func (c Component) migrateTx(ctx context.Context, tx pgx.Tx) error {
	var iso string
	if err := tx.QueryRow(ctx, "SELECT current_setting('transaction_isolation')").Scan(&iso); err != nil {
		return fmt.Errorf("migrate %s: %w", c, err)
	}
	if iso != "read committed" {
		return fmt.Errorf("migrate %s: the transaction is %s; migrations need read committed, so that the advisory lock serialises them", c, iso)
	}
	if _, err := tx.Exec(ctx, lockSQL, c.Schema); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", c, err)
	}
	if _, err := tx.Exec(ctx, c.versionTableDDL()); err != nil {
		return fmt.Errorf("migrate %s: version table: %w", c, err)
	}
	var applied int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+c.versionTable()+
		" WHERE component = $1 AND name = $2", c.Kind, c.Name).Scan(&applied); err != nil {
		return fmt.Errorf("migrate %s: read version: %w", c, err)
	}
	if applied == 0 && len(c.Migrations) > 0 {
		adopted, err := c.adopt(ctx, tx)
		if err != nil {
			return err
		}
		if adopted {
			applied = 1
		}
	}
	for _, m := range c.Migrations[min(applied, len(c.Migrations)):] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s to version %d (%s): %w", c, m.Version, m.Description, c.explain(m, err))
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+c.versionTable()+" (component, name, version, description) VALUES ($1, $2, $3, $4)",
			c.Kind, c.Name, m.Version, m.Description); err != nil {
			return fmt.Errorf("migrate %s: record version %d: %w", c, m.Version, err)
		}
	}
	return nil
}

// lockSQL takes the migration lock of one schema ($1, or the search_path's when
// NULL or empty). Keyed by schema: tables of two schemas never collide in the
// catalogue, so their migrations need not wait for each other.
const lockSQL = `SELECT pg_advisory_xact_lock(hashtextextended('coordkit.migrate:' || coalesce(nullif($1::text, ''), current_schema(), ''), 0))`

// Applied returns the highest version recorded for the component, 0 when none is
// (or when VersionTable does not exist). It does not lock.
func (c Component) Applied(ctx context.Context, db DBTX) (int, error) {
	var exists bool
	if err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", c.versionTable()).Scan(&exists); err != nil {
		return 0, c.fail(fmt.Errorf("schema version of %s: %w", c, err))
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := db.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+c.versionTable()+
		" WHERE component = $1 AND name = $2", c.Kind, c.Name).Scan(&v); err != nil {
		return 0, c.fail(fmt.Errorf("schema version of %s: %w", c, err))
	}
	return v, nil
}

// Version returns what SchemaVersion reports: the applied and the newest version.
func (c Component) Version(ctx context.Context, db DBTX) (applied, latest int, err error) {
	applied, err = c.Applied(ctx, db)
	return applied, c.Latest(), err
}

// fail prefixes err with the owning package's name (nil stays nil).
func (c Component) fail(err error) error {
	if err == nil || c.Owner == "" {
		return err
	}
	return fmt.Errorf("%s: %w", c.Owner, err)
}

// SQL returns the migrations as plain SQL, one element per version in order, each
// ending with the statement that records it in VersionTable (the first also
// creates VersionTable), so a schema migrated by another tool reports the same
// version and a later Migrate applies only what is missing. Apply each element
// once, in order, in one transaction.
func (c Component) SQL() []string {
	out := make([]string, 0, len(c.Migrations))
	for i, m := range c.Migrations {
		var b strings.Builder
		if i == 0 {
			b.WriteString(c.versionTableDDL())
			b.WriteString(";\n")
		}
		b.WriteString(strings.TrimSpace(m.SQL))
		fmt.Fprintf(&b, "\nINSERT INTO %s (component, name, version, description) VALUES (%s, %s, %d, %s);\n",
			c.versionTable(), literal(c.Kind), literal(c.Name), m.Version, literal(m.Description))
		out = append(out, b.String())
	}
	return out
}

// String names the component's main table for messages ("app"."coord_outbox"): the
// package that owns the component prefixes its own name.
func (c Component) String() string { return Qualified(c.Schema, c.Name) }

func (c Component) versionTable() string { return Qualified(c.Schema, VersionTable) }

func (c Component) versionTableDDL() string {
	return `CREATE TABLE IF NOT EXISTS ` + c.versionTable() + ` (
    component   text        NOT NULL,
    name        text        NOT NULL,
    version     integer     NOT NULL CHECK (version > 0),
    description text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, name, version)
)`
}

// explain adds what an "already exists" error means here: the name belongs to
// something this component's recorded migrations did not create. (Tables of the
// component created before versions were recorded are adopted before this point
// when they match version 1; see adopt.)
func (c Component) explain(m Migration, err error) error {
	if pgerr.Code(err) != pgerr.DuplicateTable {
		return err
	}
	return fmt.Errorf("%w (the relation was not created by this component's recorded migrations: another "+
		"component or the application uses the name, so configure another one)", err)
}

// literal quotes s as an SQL string constant. The E” form reads the same whatever
// standard_conforming_strings says.
func literal(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}
