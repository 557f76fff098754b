package saga

import (
	"context"
	"embed"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Beginner is what Migrate needs: *pgxpool.Pool, *pgx.Conn and pgx.Tx all qualify.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// DefaultTable is the default name of the saga table.
const DefaultTable = "coord_sagas"

// DefaultBarrierTable is the default name of the participant-side barrier table.
const DefaultBarrierTable = "coord_saga_barrier"

// tableName accepts plain identifiers only: a letter or underscore, then letters,
// digits and underscores, at most 48 bytes (room for index-name suffixes within
// Postgres's 63). Names are still always quoted with pgx.Identifier.
var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func validateTable(field, name string) error {
	if !tableName.MatchString(name) {
		v := name
		if len(v) > 64 {
			v = v[:64]
		}
		return fmt.Errorf("%w: %s %q: want a letter or '_' then letters, digits or '_', at most 48 bytes", ErrInvalidConfig, field, v)
	}
	return nil
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// MigrateOpts names the tables Migrate creates. A nil *MigrateOpts uses the defaults.
type MigrateOpts struct {
	Table        string // saga table; default DefaultTable
	BarrierTable string // barrier table; default DefaultBarrierTable; "-" skips it
}

// Migrate creates the saga table (and, unless opts.BarrierTable is "-", the barrier
// table) if they do not exist, in one transaction serialised by an advisory lock,
// so concurrent callers are safe. It blocks for the DDL; ctx cancels it. Invalid
// table names return ErrInvalidConfig before anything is sent.
func Migrate(ctx context.Context, db Beginner, opts *MigrateOpts) error {
	var o MigrateOpts
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if o.BarrierTable == "" {
		o.BarrierTable = DefaultBarrierTable
	}
	if err := validateTable("table", o.Table); err != nil {
		return err
	}
	stmts := []string{}
	s, err := render("migrations/001_sagas.sql", map[string]string{
		"sagas":                       o.Table,
		"due_idx":                     o.Table + "_due_idx",
		"state_idx":                   o.Table + "_state_idx",
		"no_compensation_after_pivot": o.Table + "_no_comp_after_pivot",
	})
	if err != nil {
		return err
	}
	stmts = append(stmts, s)
	if o.BarrierTable != "-" {
		if err := validateTable("barrier table", o.BarrierTable); err != nil {
			return err
		}
		s, err := render("migrations/001_barrier.sql", map[string]string{"barrier": o.BarrierTable})
		if err != nil {
			return err
		}
		stmts = append(stmts, s)
	}
	return runDDL(ctx, db, stmts)
}

func runDDL(ctx context.Context, db Beginner, stmts []string) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("saga: migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('coordkit.saga.migrate'))"); err != nil {
		return fmt.Errorf("saga: migrate: %w", err)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return fmt.Errorf("saga: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("saga: migrate: %w", err)
	}
	return nil
}

// render replaces {{name}} with the quoted identifier for names[name].
func render(file string, names map[string]string) (string, error) {
	b, err := migrations.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("saga: migration %s: %w", file, err)
	}
	s := string(b)
	for k, v := range names {
		s = strings.ReplaceAll(s, "{{"+k+"}}", ident(v))
	}
	if strings.Contains(s, "{{") {
		return "", fmt.Errorf("saga: migration %s: unreplaced placeholder", file)
	}
	return s, nil
}
