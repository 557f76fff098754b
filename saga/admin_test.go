package saga

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestAdmin(t *testing.T) {
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	ctx := context.Background()
	// Not running yet: a never-claimed saga cancels straight to compensated.
	idle, err := Start(ctx, c, def, order{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, idle, "customer changed their mind"); err != nil {
		t.Fatal(err)
	}
	if i, _ := c.Get(ctx, idle); i.State != StateCompensated {
		t.Fatalf("cancelled idle saga: %+v", i)
	}
	if err := c.Cancel(ctx, idle, "again"); !errors.Is(err, ErrWrongState) {
		t.Fatalf("cancel terminal: %v", err)
	}
	if err := c.Cancel(ctx, "nope", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	if err := c.Cancel(ctx, idle, "bad\xff"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("cancel invalid reason: %v", err)
	}

	// A saga stuck retrying charge (before the pivot): cancel compensates reserve
	// and (null-)compensates charge.
	gate := make(chan struct{})
	stuck, err := Start(ctx, c, def, order{FlakyAt: "charge"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.hook = func(p hookPoint, id string, step int) {
		if id == stuck && p == hookBeforeAction && step == 1 {
			<-gate
		}
	}
	run(t, c)
	deadline := time.Now().Add(20 * time.Second)
	for {
		i, _ := c.Get(ctx, stuck)
		if i.Step == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("saga never reached charge: %+v", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Cancel(ctx, stuck, "fraud check"); err != nil {
		t.Fatal(err)
	}
	close(gate) // the runner in charge finds itself fenced
	i := waitState(t, c, stuck, 20*time.Second, StateCompensated, StateNeedsHuman, StateCompleted)
	if i.State != StateCompensated || i.Failure != "cancelled: fraud check" {
		t.Fatalf("cancelled saga %+v", i)
	}
	got := effects(t, e.db.Pool, stuck)
	if got["reserve/action"] != 1 || got["reserve/compensate"] != 1 || got["charge/action"]+got["ship/action"] != 0 {
		t.Fatalf("effects %v", got)
	}
	waitFenced(t, c, 1)

	// List by state and age; RetryNow.
	if l, err := c.List(ctx, &ListOpts{Type: "order", States: []State{StateCompensated}}); err != nil || len(l) != 2 {
		t.Fatalf("list compensated: %d %v", len(l), err)
	}
	if l, _ := c.List(ctx, &ListOpts{OlderThan: time.Hour}); len(l) != 0 {
		t.Fatalf("list older than 1h: %d", len(l))
	}
	if _, err := c.List(ctx, &ListOpts{States: []State{"bogus"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	if err := c.RetryNow(ctx, stuck); !errors.Is(err, ErrWrongState) {
		t.Fatalf("retry terminal: %v", err)
	}
	if err := c.RetryNow(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
	later, err := Start(ctx, c, def, order{}, &StartOpts{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RetryNow(ctx, later); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, later, 20*time.Second, StateCompleted)
}

func waitFenced(t *testing.T, c *Client, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().FencedWrites < n {
		if time.Now().After(deadline) {
			t.Fatalf("fenced writes %+v, want %d", c.Stats(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBarrier(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.p.b
	ran := 0
	fn := func(ctx context.Context, tx pgx.Tx) error { ran++; return nil }
	do := func(op func(context.Context, pgx.Tx, string, func(context.Context, pgx.Tx) error) (Outcome, error), key string) Outcome {
		t.Helper()
		tx, err := e.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		o, err := op(ctx, tx, key, fn)
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// duplicate action
	if o := do(b.ActionTx, "s1/pay"); o != Ran {
		t.Fatal(o)
	}
	if o := do(b.ActionTx, "s1/pay"); o != Duplicate {
		t.Fatal(o)
	}
	// compensation after the action, then a duplicate compensation
	if o := do(b.CompensateTx, "s1/pay"); o != Ran {
		t.Fatal(o)
	}
	if o := do(b.CompensateTx, "s1/pay"); o != Duplicate {
		t.Fatal(o)
	}
	// null compensation, then the hanging action
	if o := do(b.CompensateTx, "s2/pay"); o != NullCompensation {
		t.Fatal(o)
	}
	if o := do(b.ActionTx, "s2/pay"); o != Hanging {
		t.Fatal(o)
	}
	if ran != 2 {
		t.Fatalf("fn ran %d times, want 2", ran)
	}
	// a failing fn leaves nothing behind once the caller rolls back
	tx, _ := e.db.Pool.Begin(ctx)
	boom := errors.New("boom")
	if _, err := b.ActionTx(ctx, tx, "s3/pay", func(context.Context, pgx.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	if o := do(b.ActionTx, "s3/pay"); o != Ran {
		t.Fatalf("after rollback: %v", o)
	}
	tx, _ = e.db.Pool.Begin(ctx)
	defer tx.Rollback(ctx)
	if _, err := b.ActionTx(ctx, tx, "no-slash", fn); !errors.Is(err, ErrBarrierKey) {
		t.Fatal(err)
	}
	for _, o := range []Outcome{Ran, Duplicate, NullCompensation, Hanging, 9} {
		if o.String() == "" {
			t.Fatal("empty outcome string")
		}
	}
}

// An operator's note or reason that PostgreSQL cannot store (a NUL byte, from a
// form or a script) is refused as ErrInvalidConfig before anything is written,
// not sent to the database to fail there.
func TestAdminRefusesTextPostgresCannotStore(t *testing.T) {
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	ctx := context.Background()
	id, err := Start(ctx, c, def, order{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, id, "nul\x00byte"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("cancel with a NUL in the reason: %v, want ErrInvalidConfig", err)
	}
	if err := c.Resolve(ctx, id, ResolveRetry, "nul\x00byte"); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("resolve with a NUL in the note: %v, want ErrInvalidConfig", err)
	}
	if i, err := c.Get(ctx, id); err != nil || i.State == StateCompensated {
		t.Fatalf("saga after refused admin calls: %+v, %v", i, err)
	}
}
