package idempotency

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Execer is what Migrate needs: a *pgxpool.Pool, *pgx.Conn or pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Migrate creates the key table and its indexes if they do not exist (idempotent,
// safe to run on every start). It blocks for the DDL; ctx cancels it. Run it in a
// transaction (pass a pgx.Tx) to combine it with other migrations.
func (s *Store) Migrate(ctx context.Context, db Execer) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	last := s.ident[len(s.ident)-1]
	r := strings.NewReplacer(
		"{{table}}", s.table,
		"{{created_idx}}", pgx.Identifier{last + "_created_idx"}.Sanitize(),
		"{{abandoned_idx}}", pgx.Identifier{last + "_abandoned_idx"}.Sanitize(),
	)
	for _, name := range names {
		b, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := db.Exec(ctx, r.Replace(string(b))); err != nil {
			return fmt.Errorf("idempotency: migrate %s: %w", name, err)
		}
	}
	return nil
}
