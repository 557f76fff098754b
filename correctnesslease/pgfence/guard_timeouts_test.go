package pgfence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// TestGuardTxBusyAfterLockTimeout: while another transaction holds the fence row
// (busy, not idle: the idle timeout does not apply to it), a newer guard waits
// LockTimeout and then gets a typed, retryable *BusyError, having written nothing;
// once the row is free the retry goes through.
func TestGuardTxBusyAfterLockTimeout(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{LockTimeout: 200 * time.Millisecond, IdleTimeout: -1})
	ctx := testCtx(t)
	holder, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if err := f.GuardTx(ctx, holder, tok(t, "/busy@10")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = guard(ctx, f, db.Pool, tok(t, "/busy@11"))
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
