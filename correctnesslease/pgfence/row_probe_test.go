package pgfence_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// probeDB is a DBTX whose UPDATE never matches and whose probe answers with a
// fixed row count and highest fence: the paths of Update that a real database
// reaches only in a race.
type probeDB struct {
	count   int64
	highest *int64
	updates int
	probes  int
}

var errEndless = errors.New("probeDB: more than 10 updates: Update retries without end")

func (d *probeDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	d.updates++
	if d.updates > 10 {
		return pgconn.CommandTag{}, errEndless
	}
	return pgconn.NewCommandTag("UPDATE 0"), nil
}

func (d *probeDB) QueryRow(context.Context, string, ...any) pgx.Row {
	d.probes++
	return probeRow{d}
}

// Query is DBTX's; Update never calls it.
func (d *probeDB) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errors.New("probeDB: Update called Query")
}

type probeRow struct{ d *probeDB }

func (r probeRow) Scan(dest ...any) error {
	*dest[0].(*int64) = r.d.count
	*dest[1].(**int64) = r.d.highest
	return nil
}

func newRowUpdater(t *testing.T) *pgfence.RowUpdater {
	t.Helper()
	f, err := pgfence.New(pgfence.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "accounts", Set: []string{"balance"}, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRowUpdaterProbeOutcomes: after an UPDATE that matched nothing, the probe
// decides — no row, a NULL fence, a newer fence (stale) — in one round, and a row
// whose fence is not newer (it changed under the UPDATE) is retried, three
// attempts in all, never forever.
func TestRowUpdaterProbeOutcomes(t *testing.T) {
	ctx := context.Background()
	u := newRowUpdater(t)
	tk := tok(t, "/acct@7")
	rev := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		name     string
		db       probeDB
		check    func(error) bool
		attempts int
	}{
		{"no row", probeDB{count: 0}, func(err error) bool { return errors.Is(err, pgfence.ErrRowNotFound) }, 1},
		{"NULL fence", probeDB{count: 1}, func(err error) bool {
			return err != nil && !errors.Is(err, coord.ErrStaleToken) && !errors.Is(err, pgfence.ErrRowNotFound)
		}, 1},
		{"newer fence", probeDB{count: 1, highest: rev(8)}, func(err error) bool {
			var stale *coord.StaleTokenError
			return errors.As(err, &stale) && stale.Highest.Revision() == 8
		}, 1},
		{"equal fence: changed under the update", probeDB{count: 1, highest: rev(7)}, func(err error) bool {
			return err != nil && !errors.Is(err, coord.ErrStaleToken) && !errors.Is(err, pgfence.ErrRowNotFound) && !errors.Is(err, errEndless)
		}, 3},
		{"older fence: changed under the update", probeDB{count: 1, highest: rev(6)}, func(err error) bool {
			return err != nil && !errors.Is(err, coord.ErrStaleToken) && !errors.Is(err, errEndless)
		}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := c.db
			n, err := u.Update(ctx, &db, tk, []any{1}, 10)
			if n != 0 || !c.check(err) {
				t.Fatalf("Update = %d, %v", n, err)
			}
			if db.updates != c.attempts || db.probes != c.attempts {
				t.Fatalf("%d updates and %d probes, want %d of each", db.updates, db.probes, c.attempts)
			}
		})
	}
}

// TestRowUpdaterRefusesWrongArityBeforeTheDatabase: a wrong number of key or set
// values is refused without sending a statement.
func TestRowUpdaterRefusesWrongArityBeforeTheDatabase(t *testing.T) {
	ctx := context.Background()
	u := newRowUpdater(t)
	for _, c := range []struct {
		key, set []any
	}{
		{[]any{1}, nil},
		{[]any{1}, []any{1, 2}},
		{nil, []any{1}},
		{[]any{1, 2}, []any{1}},
	} {
		db := &probeDB{}
		if _, err := u.Update(ctx, db, tok(t, "/acct@7"), c.key, c.set...); err == nil || db.updates+db.probes != 0 {
			t.Errorf("Update with %d key and %d set values: %v after %d statements, want an error and none", len(c.key), len(c.set), err, db.updates+db.probes)
		}
	}
}

// TestRowSpecSchemaIsChecked: an invalid schema in a RowSpec is refused like an
// invalid table.
func TestRowSpecSchemaIsChecked(t *testing.T) {
	f, err := pgfence.New(pgfence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.RowUpdater(pgfence.RowSpec{Schema: "bad\x00schema", Table: "t", Set: []string{"a"}, Key: []string{"id"}}); !errors.Is(err, coord.ErrInvalidName) {
		t.Fatalf("RowUpdater with an invalid schema = %v, want ErrInvalidName", err)
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Schema: "Other Schema", Table: "t", Set: []string{"a"}, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := u.SQL(), `UPDATE "Other Schema"."t" SET "a" = $1, "fence" = $3 WHERE "id" = $2 AND "fence" <= $3`; got != want {
		t.Fatalf("SQL = %s, want %s", got, want)
	}
}
