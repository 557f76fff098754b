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

func TestRowUpdater(t *testing.T) {
	f, db, reader := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE accounts (
		tenant text, id int, balance bigint, note text, fence bigint NOT NULL DEFAULT 0,
		PRIMARY KEY (tenant, id));
		INSERT INTO accounts (tenant, id, balance) VALUES ('a', 1, 0), ('a', 2, 0)`); err != nil {
		t.Fatal(err)
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "accounts", Set: []string{"balance", "note"}, Key: []string{"tenant", "id"}})
	if err != nil {
		t.Fatal(err)
	}
	key := []any{"a", 1}
	for _, step := range []struct {
		tok     string
		balance int
		want    error
	}{
		{"/acct@5", 10, nil},
		{"/acct@5", 11, nil},                 // equal token accepted
		{"/acct@8", 12, nil},                 // newer accepted
		{"/acct@7", 99, coord.ErrStaleToken}, // older rejected
	} {
		n, err := u.Update(ctx, db.Pool, tok(t, step.tok), key, step.balance, "by "+step.tok)
		if !errors.Is(err, step.want) || (err == nil && n != 1) {
			t.Fatalf("Update(%s) = %d, %v; want %v", step.tok, n, err, step.want)
		}
	}
	var stale *coord.StaleTokenError
	_, err = u.Update(ctx, db.Pool, tok(t, "/acct@6"), key, 100, "stale")
	if !errors.As(err, &stale) || stale.Highest.Revision() != 8 || stale.Presented.Revision() != 6 {
		t.Fatalf("stale Update = %v, want *StaleTokenError highest 8", err)
	}
	var balance, fence int64
	if err := db.Pool.QueryRow(ctx, "SELECT balance, fence FROM accounts WHERE tenant='a' AND id=1").Scan(&balance, &fence); err != nil {
		t.Fatal(err)
	}
	if balance != 12 || fence != 8 {
		t.Fatalf("row = balance %d fence %d, want 12 and 8", balance, fence)
	}
	// A missing row is not a stale token.
	if _, err := u.Update(ctx, db.Pool, tok(t, "/acct@9"), []any{"a", 404}, 1, "x"); !errors.Is(err, pgfence.ErrRowNotFound) || errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("Update of a missing row = %v, want ErrRowNotFound", err)
	}
	// Row fences are per row: row 2 has never been written.
	if _, err := u.Update(ctx, db.Pool, tok(t, "/acct@3"), []any{"a", 2}, 1, "x"); err != nil {
		t.Fatalf("Update of another row: %v", err)
	}
	if _, err := u.Update(ctx, db.Pool, coord.Token{}, key, 1, "x"); !errors.Is(err, pgfence.ErrZeroToken) {
		t.Fatalf("zero token = %v", err)
	}
	if _, err := u.Update(ctx, db.Pool, tok(t, "/acct@9"), key, 1); err == nil {
		t.Fatal("wrong number of values accepted")
	}
	if got := rejections(t, reader); got["/acct"] != 2 {
		t.Fatalf("coordkit.pgfence.rejected = %v, want 2 for /acct", got)
	}
	// Inside the caller's transaction too.
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := u.Update(ctx, tx, tok(t, "/acct@7"), key, 1, "x"); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("stale Update in a tx = %v", err)
	}
}

func TestRowUpdaterNullFence(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE n (id int PRIMARY KEY, v int, fence bigint); INSERT INTO n VALUES (1, 0, NULL)`); err != nil {
		t.Fatal(err)
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "n", Set: []string{"v"}, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Update(ctx, db.Pool, tok(t, "/n@1"), []any{1}, 5); err == nil || errors.Is(err, coord.ErrStaleToken) || errors.Is(err, pgfence.ErrRowNotFound) {
		t.Fatalf("Update with NULL fence = %v, want a clear schema error", err)
	}
}

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
