package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func guard(ctx context.Context, f *pgfence.Fence, pool *pgxpool.Pool, k coord.Token) error {
	return f.Exec(ctx, pool, k, func(context.Context, pgx.Tx) error { return nil })
}

// guardedTx begins a transaction on pool that guards k: it holds k's fence row
// until it ends (rolled back when the test ends, if it has not ended before).
func guardedTx(ctx context.Context, t *testing.T, f *pgfence.Fence, pool *pgxpool.Pool, k coord.Token) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if err := f.GuardTx(ctx, tx, k); err != nil {
		t.Fatal(err)
	}
	return tx
}

func TestGuardTxOrdersTokensPerLease(t *testing.T) {
	f, db, reader := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	x5, x6, x7 := tok(t, "/tenants/t/elections/x@5"), tok(t, "/tenants/t/elections/x@6"), tok(t, "/tenants/t/elections/x@7")
	y1 := tok(t, "/tenants/t/elections/y@1")

	for _, k := range []coord.Token{x5, x5, x7, x7} { // first, equal, newer, equal
		if err := guard(ctx, f, db.Pool, k); err != nil {
			t.Fatalf("guard %s: %v", k, err)
		}
	}
	err := guard(ctx, f, db.Pool, x6)
	var stale *coord.StaleTokenError
	if !errors.As(err, &stale) || !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("guard %s after %s = %v, want *coord.StaleTokenError", x6, x7, err)
	}
	if stale.Presented != x6 || stale.Highest != x7 {
		t.Fatalf("stale error = {%s, %s}, want {%s, %s}", stale.Presented, stale.Highest, x6, x7)
	}
	if err := guard(ctx, f, db.Pool, x5); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("guard %s = %v, want stale", x5, err)
	}
	// Leases are fenced independently.
	if err := guard(ctx, f, db.Pool, y1); err != nil {
		t.Fatalf("guard %s: %v", y1, err)
	}
	if h, err := f.Highest(ctx, db.Pool, x7.Lease()); err != nil || h != 7 {
		t.Fatalf("Highest(x) = %d, %v; want 7", h, err)
	}
	if h, err := f.Highest(ctx, db.Pool, "/tenants/t/elections/never"); err != nil || h != 0 {
		t.Fatalf("Highest(never) = %d, %v; want 0", h, err)
	}
	if got := rejections(t, reader); got[x6.Lease()] != 2 || len(got) != 1 {
		t.Fatalf("coordkit.pgfence.rejected = %v, want 2 for %s only", got, x6.Lease())
	}
}

func TestExecCommitsOnlyFencedSuccessfulWork(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE writes (v text)"); err != nil {
		t.Fatal(err)
	}
	if err := f.Exec(ctx, db.Pool, tok(t, "/l@10"), insertInto("writes", "ok")); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := f.Exec(ctx, db.Pool, tok(t, "/l@10"), func(ctx context.Context, tx pgx.Tx) error {
		if err := insertInto("writes", "rolled back")(ctx, tx); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Exec with failing fn = %v, want boom", err)
	}
	called := false
	if err := f.Exec(ctx, db.Pool, tok(t, "/l@9"), func(context.Context, pgx.Tx) error { called = true; return nil }); !errors.Is(err, coord.ErrStaleToken) || called {
		t.Fatalf("stale Exec = %v (fn called %v), want stale and fn not called", err, called)
	}
	if err := f.Exec(ctx, db.Pool, coord.Token{}, insertInto("writes", "zero")); !errors.Is(err, pgfence.ErrZeroToken) || !errors.Is(err, coord.ErrInvalidToken) {
		t.Fatalf("zero token Exec = %v, want ErrZeroToken", err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.GuardTx(ctx, tx, coord.Token{}); !errors.Is(err, pgfence.ErrZeroToken) {
		t.Fatalf("zero token GuardTx = %v, want ErrZeroToken", err)
	}
	_ = tx.Rollback(ctx)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := f.Exec(cancelled, db.Pool, tok(t, "/l@11"), insertInto("writes", "cancelled")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec with cancelled ctx = %v, want context.Canceled", err)
	}
	var got []string
	rows, _ := db.Pool.Query(ctx, "SELECT v FROM writes ORDER BY v")
	got, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "ok" {
		t.Fatalf("committed writes = %q, want [ok]", got)
	}
	if h, _ := f.Highest(ctx, db.Pool, "/l"); h != 10 {
		t.Fatalf("highest = %d, want 10 (cancelled and failed writes record nothing)", h)
	}
}

// runBlocked runs op in a goroutine and waits until another backend is blocked
// on a lock that blocker's transaction holds, failing if op returns first: it
// proves the wait, rather than timing it. Only backends blocker blocks count: the
// server is shared, and another test's guard waiting on its own fence row proves
// nothing here. op's result arrives on the returned channel.
func runBlocked(ctx context.Context, t *testing.T, pool *pgxpool.Pool, blocker pgx.Tx, op func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- op() }()
	pid := blocker.Conn().PgConn().PID()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("finished (%v) while another transaction held the fence row", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("never blocked on the fence row")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The fence row stays locked until the guarding transaction ends, so a newer holder
// cannot slip in between the old holder's guard and its writes.
func TestGuardTxHoldsRowUntilTransactionEnds(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	old := guardedTx(ctx, t, f, db.Pool, tok(t, "/held@10"))
	// Prove the newer guard is blocked on the row lock, not merely slow.
	done := runBlocked(ctx, t, db.Pool, old, func() error { return guard(ctx, f, db.Pool, tok(t, "/held@11")) })
	// The old holder's writes in its transaction still go through: it was the
	// holder when it guarded, and nobody newer has committed.
	if _, err := old.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, done, 30*time.Second, "the newer guard returning after the old transaction committed"); err != nil {
		t.Fatalf("newer guard after the old transaction committed: %v", err)
	}
	// And now the old token is stale.
	if err := guard(ctx, f, db.Pool, tok(t, "/held@10")); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("old token after the newer committed = %v, want stale", err)
	}
}

// A newer holder that guarded first makes an older guard wait and then fail.
func TestGuardTxOlderWaitsThenFails(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	newer := guardedTx(ctx, t, f, db.Pool, tok(t, "/race@21"))
	done := runBlocked(ctx, t, db.Pool, newer, func() error { return guard(ctx, f, db.Pool, tok(t, "/race@20")) })
	if err := newer.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, done, 30*time.Second, "the older guard returning after the newer committed"); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("older guard = %v, want stale", err)
	}
}

// TestGuardTxBusyAfterLockTimeout: while another transaction holds the fence row
// (busy, not idle: the idle timeout does not apply to it), a newer guard waits
// LockTimeout and then gets a typed, retryable *BusyError, having written nothing;
// once the row is free the retry goes through.
func TestGuardTxBusyAfterLockTimeout(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{LockTimeout: 200 * time.Millisecond, IdleTimeout: -1})
	ctx := testCtx(t)
	holder := guardedTx(ctx, t, f, db.Pool, tok(t, "/busy@10"))
	start := time.Now()
	err := guard(ctx, f, db.Pool, tok(t, "/busy@11"))
	waited := time.Since(start)
	var be *pgfence.BusyError
	if !errors.As(err, &be) || !errors.Is(err, pgfence.ErrBusy) || !be.Retryable() || !coord.Retryable(err) {
		t.Fatalf("guard while the row is held = %v, want a retryable *pgfence.BusyError", err)
	}
	if be.Token != tok(t, "/busy@11") || be.Waited != 200*time.Millisecond || errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("BusyError %+v", be)
	}
	if waited < 200*time.Millisecond {
		t.Fatalf("BusyError after %v, before the lock timeout", waited)
	}
	if err := holder.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if h, _ := f.Highest(ctx, db.Pool, "/busy"); h != 10 {
		t.Fatalf("highest %d after the busy guard, want 10 (it wrote nothing)", h)
	}
	if err := guard(ctx, f, db.Pool, tok(t, "/busy@11")); err != nil {
		t.Fatalf("retry after the row was freed: %v", err)
	}
}

// TestGuardTxTimeoutSettings: the lock timeout covers the guard statement only
// (the transaction's own lock_timeout is back afterwards, so the caller's writes
// wait as the caller configured), while the idle timeout stays for the rest of the
// fenced transaction; both derive from LeaseTTL by default.
func TestGuardTxTimeoutSettings(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{LeaseTTL: 9 * time.Second})
	ctx := testCtx(t)
	for _, own := range []string{"", "7s"} {
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := "0"
		if own != "" {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '"+own+"'"); err != nil {
				t.Fatal(err)
			}
			want = own
		}
		if err := f.GuardTx(ctx, tx, tok(t, "/settings@3")); err != nil {
			t.Fatal(err)
		}
		var lock, idle string
		if err := tx.QueryRow(ctx, "SELECT current_setting('lock_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&lock, &idle); err != nil {
			t.Fatal(err)
		}
		if lock != want || idle != "3s" {
			t.Errorf("after GuardTx (own lock_timeout %q): lock_timeout %q, idle_in_transaction_session_timeout %q; want %q and 3s", own, lock, idle, want)
		}
		_ = tx.Rollback(ctx)
	}
	// Outside the fenced transaction nothing changed.
	var idle string
	if err := db.Pool.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&idle); err != nil || idle != "0" {
		t.Fatalf("idle_in_transaction_session_timeout outside a fenced transaction = %q, %v; want 0", idle, err)
	}
}

// TestRejectionLabelCardinalityIsBounded: each distinct lease name is a fence row
// and would be a coordkit.lease label value of coordkit.pgfence.rejected. Past
// DefaultMaxLeaseLabels distinct leases the counter reports "other", and counts
// every rejection.
func TestRejectionLabelCardinalityIsBounded(t *testing.T) {
	f, db, reader := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	const leases = 110
	for i := range leases {
		lease := fmt.Sprintf("/tenants/t/elections/n-%03d", i)
		if err := guard(ctx, f, db.Pool, tok(t, lease+"@2")); err != nil {
			t.Fatal(err)
		}
		if err := guard(ctx, f, db.Pool, tok(t, lease+"@1")); err == nil {
			t.Fatalf("%s@1 accepted after @2", lease)
		}
	}
	got := rejections(t, reader)
	var total int64
	for _, n := range got {
		total += n
	}
	if len(got) > 101 || total != leases || got["other"] != leases-100 {
		t.Fatalf("coordkit.pgfence.rejected: %d label values, total %d, other %d; want at most 101, %d, %d", len(got), total, got["other"], leases, leases-100)
	}
}
