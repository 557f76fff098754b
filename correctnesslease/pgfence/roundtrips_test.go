package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRoundTripsOfAFencedWrite holds the round trips of each fenced write, counted
// on the wire (coordtest.RoundTrips): Exec on a pool or a connection sends the
// guard with BEGIN, so a fenced transaction costs what the unfenced one does; a
// RowUpdater adds nothing to its single statement. A change that adds a round
// trip fails here.
func TestRoundTripsOfAFencedWrite(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL DEFAULT 0);
		INSERT INTO accounts VALUES (1, 0, 0);
		CREATE TABLE ledger (id bigserial PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	pool, rt := db.CountingPool(t, 1)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k := tok(t, "/tenants/t/elections/rt@3")
	work := func(ctx context.Context, tx pgx.Tx) error { // two statements
		if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + 1 WHERE id = 1"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO ledger (amount) VALUES (1)")
		return err
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "accounts", Set: []string{"balance"}, Key: []string{"id"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want float64
		op   func() error
	}{
		{"unfenced: BEGIN; 2 statements; COMMIT", 4, func() error {
			return pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error { return work(ctx, tx) })
		}},
		{"Exec on a *pgx.Conn", 4, func() error { return f.Exec(ctx, conn.Conn(), k, work) }},
		{"BEGIN; GuardTx; 2 statements; COMMIT (the caller's transaction)", 5, func() error {
			return pgx.BeginFunc(ctx, conn.Conn(), func(tx pgx.Tx) error {
				if err := f.GuardTx(ctx, tx, k); err != nil {
					return err
				}
				return work(ctx, tx)
			})
		}},
		{"RowUpdater.Update", 1, func() error { _, err := u.Update(ctx, conn.Conn(), k, []any{1}, int64(5)); return err }},
	} {
		for range 3 { // prepare the statements on the connection
			if err := c.op(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		got, err := rt.Of(10, c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %.1f round trips", c.name, got)
		if got != c.want {
			t.Errorf("%s: %.1f round trips, want %.0f", c.name, got, c.want)
		}
	}
	conn.Release()
	// On the pool (Acquire, then the same): Exec as the unfenced transaction.
	plain := func() error { return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return work(ctx, tx) }) }
	fenced := func() error { return f.Exec(ctx, pool, k, work) }
	for _, op := range []func() error{plain, fenced, plain, fenced} {
		if err := op(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := rt.Of(10, plain)
	if err != nil {
		t.Fatal(err)
	}
	e, err := rt.Of(10, fenced)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("on a pool: unfenced %.1f, Exec %.1f round trips", p, e)
	if p != 4 || e != p {
		t.Errorf("on a pool: Exec %.1f round trips, unfenced %.1f; want 4 and 4", e, p)
	}
}

// TestExecInsideATransactionStillFences: Exec on a pgx.Tx (a savepoint: BEGIN
// cannot be batched there) guards as on a pool — a stale token is refused, fn is
// not called, and the caller's transaction survives a busy or stale verdict only
// through its own rollback.
func TestExecInsideATransactionStillFences(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	if err := f.Exec(ctx, db.Pool, tok(t, "/sp@7"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	called := false
	err = f.Exec(ctx, tx, tok(t, "/sp@6"), func(context.Context, pgx.Tx) error { called = true; return nil })
	if !errors.Is(err, coord.ErrStaleToken) || called {
		t.Fatalf("Exec on a pgx.Tx with a stale token = %v (fn called %v), want stale, fn not called", err, called)
	}
	if err := f.Exec(ctx, tx, tok(t, "/sp@8"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("Exec on a pgx.Tx after the stale one rolled back its savepoint: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := f.Highest(ctx, db.Pool, "/sp"); h != 8 {
		t.Fatalf("highest %d, want 8", h)
	}
}

// TestExecCutWhileBeginAndGuardAreInFlight: the connection is cut while the
// round trip that carries BEGIN and the guard is in flight (its answer held in the
// proxy). Exec must fail — not ErrCommitUnknown: no COMMIT was sent —, fn must not
// run, nothing may be recorded, and the pooled connection must not leak: the next
// Exec on the same one-connection pool goes through at once.
func TestExecCutWhileBeginAndGuardAreInFlight(t *testing.T) {
	rep := coordtest.NewResult(t, "connection cut while pgfence.Exec's BEGIN + guard round trip is in flight",
		coordtest.Faults("connections cut during BEGIN + guard"))
	defer coordtest.Report(t, rep)
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	pool, proxy := coordtest.ProxiedPool(t, db, 1) // one connection
	trials := coordtest.Pick(5, 20)
	const delay = 300 * time.Millisecond
	for i := range trials {
		// A connection with the guard prepared (the last trial's was cut), so that
		// the held round trip is the one with BEGIN and the guard.
		if err := f.Exec(ctx, pool, tok(t, "/cut@4"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
		cutsBefore := proxy.Stats().Cut
		proxy.Delay(delay)
		cut := make(chan struct{})
		go func() {
			defer close(cut)
			time.Sleep(delay / 3)
			proxy.Cut()
		}()
		called := false
		err := f.Exec(ctx, pool, tok(t, fmt.Sprintf("/cut@%d", 5+i)), func(context.Context, pgx.Tx) error { called = true; return nil })
		coordtest.Recv(t, cut, 30*time.Second, fmt.Sprintf("trial %d: the cut", i))
		proxy.Heal()
		if proxy.Stats().Cut == cutsBefore {
			t.Fatalf("trial %d: the proxy cut nothing", i)
		}
		if err == nil || called || errors.Is(err, pgfence.ErrCommitUnknown) {
			t.Fatalf("trial %d: Exec = %v (fn called %v), want a failure before fn, not ErrCommitUnknown", i, err, called)
		}
		// A broken connection is destroyed in the background once released.
		coordtest.Until(t, 10*time.Second, time.Millisecond, fmt.Sprintf("trial %d: the failed Exec's connection released", i),
			func() bool { return pool.Stat().AcquiredConns() == 0 })
		if h, _ := f.Highest(ctx, db.Pool, "/cut"); h != 4 {
			t.Fatalf("trial %d: highest %d after a cut before COMMIT, want 4", i, h)
		}
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := f.Exec(actx, pool, tok(t, "/cut@100"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("Exec after the cuts: %v", err)
	}
	rep.Trials = trials
	rep.Faults["connections cut during BEGIN + guard"] = proxy.Stats().Cut
	rep.Outcome["Exec failed before fn, nothing recorded, connection released"] = int64(trials)
}
