package pgfence

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// MigrationSQL returns the schema of the fence table, with the configured name
// quoted in, for teams that apply migrations with their own tool. Every statement
// is idempotent (IF NOT EXISTS).
func (f *Fence) MigrationSQL() string {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err) // the pattern is a constant
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		body, err := migrationFS.ReadFile(n)
		if err != nil {
			panic(err) // embedded at build time
		}
		b.WriteString(strings.ReplaceAll(string(body), "{{table}}", f.table))
		b.WriteString("\n")
	}
	return b.String()
}

// Migrate creates the fence table if it does not exist, in one transaction holding
// a transaction-scoped advisory lock so concurrent Migrate calls do not race. It
// blocks on that lock; ctx cancels it. It is safe to call on every start.
func (f *Fence) Migrate(ctx context.Context, db Beginner) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgfence: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err = tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "pgfence:"+f.table); err != nil {
		return fmt.Errorf("pgfence: migrate: lock: %w", err)
	}
	if _, err = tx.Exec(ctx, f.MigrationSQL()); err != nil {
		return fmt.Errorf("pgfence: migrate %s: %w", f.table, err)
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgfence: migrate: commit: %w", err)
	}
	return nil
}
