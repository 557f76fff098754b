package pgfence_test

import (
	"errors"
	"testing"

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
