package saga

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestAdminTxLockAndSummary: LockTx holds the row so that an admin call from
// another connection waits and then sees what the locking transaction did; the
// Tx variants act only when tx commits; Summary counts non-terminal sagas; Info
// carries the error history.
func TestAdminTxLockAndSummary(t *testing.T) {
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a, err := Start(ctx, c, def, order{}, &StartOpts{ID: "a", Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, c, def, order{}, &StartOpts{ID: "b", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	sum, err := c.Summary(ctx)
	if err != nil || len(sum) != 1 || sum[0].Type != "order" || sum[0].State != StateRunning || sum[0].Count != 2 || sum[0].OldestSince.IsZero() {
		t.Fatalf("Summary = %+v, %v", sum, err)
	}

	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	before, err := c.LockTx(ctx, tx, a)
	if err != nil || before.State != StateRunning || before.NextAttemptAt.Before(time.Now().Add(30*time.Minute)) {
		t.Fatalf("LockTx = %+v, %v", before, err)
	}
	cancelled := make(chan error, 1)
	go func() { cancelled <- c.Cancel(ctx, a, "raced") }()
	select {
	case err := <-cancelled:
		t.Fatalf("Cancel returned %v while LockTx held the row", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := c.CancelTx(ctx, tx, a, "operator"); err != nil {
		t.Fatal(err)
	}
	if i, _ := c.Get(ctx, a); i.State != StateRunning {
		t.Fatalf("CancelTx visible before commit: %+v", i)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := coordtest.Recv(t, cancelled, 30*time.Second, "the raced Cancel's answer after the LockTx transaction committed"); !errors.Is(err, ErrWrongState) {
		t.Fatalf("the raced Cancel = %v, want ErrWrongState (the saga already compensated)", err)
	}
	after, err := c.Get(ctx, a)
	if want := strings.Join(fixtureSteps, ","); strings.Join(after.StepNames, ",") != want {
		t.Fatalf("StepNames = %v, want %s", after.StepNames, want)
	}
	if err != nil || after.State != StateCompensated || len(after.Errors) != 1 || after.Errors[0].Error != "cancelled: operator" || after.Errors[0].At.IsZero() {
		t.Fatalf("after CancelTx: %+v, %v", after, err)
	}

	// RetryNowTx rolled back changes nothing; committed, the saga runs.
	tx, err = e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RetryNowTx(ctx, tx, "b"); err != nil {
		t.Fatal(err)
	}
	_ = tx.Rollback(ctx)
	if i, _ := c.Get(ctx, "b"); i.NextAttemptAt.Before(time.Now().Add(30 * time.Minute)) {
		t.Fatalf("a rolled-back RetryNowTx made the saga due: %+v", i)
	}
	tx, err = e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RetryNowTx(ctx, tx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	waitState(t, c, "b", 20*time.Second, StateCompleted)
	if sum, err := c.Summary(ctx); err != nil || len(sum) != 0 {
		t.Fatalf("Summary with only terminal sagas = %+v, %v", sum, err)
	}
	if _, err := c.LockTx(ctx, tx, "nope"); err == nil {
		t.Fatal("LockTx on a committed tx succeeded")
	}
}
