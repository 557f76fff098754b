package saga

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestAdmin(t *testing.T) {
	e, c, def := newFastClient(t)
	ctx := context.Background()
	// Not running yet: a never-claimed saga cancels straight to compensated.
	idle := start(t, ctx, c, def, order{}, nil)
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
	stuck := start(t, ctx, c, def, order{FlakyAt: "charge"}, nil)
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
	later := start(t, ctx, c, def, order{}, &StartOpts{Delay: time.Hour})
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
	for _, c := range []struct {
		what string
		op   func(context.Context, pgx.Tx, string, func(context.Context, pgx.Tx) error) (Outcome, error)
		key  string
		want Outcome
	}{
		{"the action", b.ActionTx, "s1/pay", Ran},
		{"a duplicate action", b.ActionTx, "s1/pay", Duplicate},
		{"the compensation after the action", b.CompensateTx, "s1/pay", Ran},
		{"a duplicate compensation", b.CompensateTx, "s1/pay", Duplicate},
		{"a null compensation", b.CompensateTx, "s2/pay", NullCompensation},
		{"the action after its null compensation", b.ActionTx, "s2/pay", Hanging},
	} {
		if o := do(c.op, c.key); o != c.want {
			t.Fatalf("%s (%s): %v, want %v", c.what, c.key, o, c.want)
		}
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
	_, c, def := newFastClient(t)
	ctx := context.Background()
	id := start(t, ctx, c, def, order{}, nil)
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

// TestAdminTxLockAndSummary: LockTx holds the row so that an admin call from
// another connection waits and then sees what the locking transaction did; the
// Tx variants act only when tx commits; Summary counts non-terminal sagas; Info
// carries the error history.
func TestAdminTxLockAndSummary(t *testing.T) {
	e, c, def := newFastClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := start(t, ctx, c, def, order{}, &StartOpts{ID: "a", Delay: time.Hour})
	start(t, ctx, c, def, order{}, &StartOpts{ID: "b", Delay: time.Hour})
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

// TestSagaListPagesSearchesAndCounts: SagaList walks every saga exactly once in
// (state_since, id) order through keyset pages, even when a saga already shown
// goes away between pages; filters by state and type; searches by id prefix and error
// text; SagaCount counts per state what the filters select; ErrNotFound and
// ErrInvalidConfig as documented.
func TestSagaListPagesSearchesAndCounts(t *testing.T) {
	e, c, def := newFastClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 25
	for i := range n {
		start(t, ctx, c, def, order{}, &StartOpts{ID: "order-" + strconv.Itoa(100+i), Delay: time.Hour})
	}
	// Seven of them need a human, one of which failed with a searchable error;
	// state_since is spread so that the order is known.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE coord_sagas SET state_since = now() - (substr(id, 7)::int * interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `UPDATE coord_sagas SET state = 'needs_human', step = 0, last_error = CASE WHEN id = 'order-103' THEN 'ledger: Account 4411 is LOCKED' ELSE 'refund failed' END
		WHERE substr(id, 7)::int % 4 = 3`); err != nil {
		t.Fatal(err)
	}

	var seen []string
	opts := &SagaListOpts{Limit: 10}
	for page := 0; ; page++ {
		res, err := c.SagaList(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Sagas {
			seen = append(seen, s.ID)
		}
		if page == 0 { // a saga already shown goes away: the next page does not shift (as an OFFSET would)
			if _, err := e.db.Pool.Exec(ctx, `DELETE FROM coord_sagas WHERE id = 'order-124'`); err != nil {
				t.Fatal(err)
			}
		}
		if res.Next == "" {
			break
		}
		opts.After = res.Next
	}
	if len(seen) != n || seen[0] != "order-124" || seen[n-2] != "order-101" {
		t.Fatalf("SagaList pages = %v: want all %d, oldest in state first, each once", seen, n)
	}
	humans, err := c.SagaList(ctx, &SagaListOpts{States: []State{StateNeedsHuman}, Type: "order"})
	if err != nil || len(humans.Sagas) != 6 || humans.Next != "" {
		t.Fatalf("SagaList(needs_human) = %d sagas, next %q, %v: want 6 on one page", len(humans.Sagas), humans.Next, err)
	}
	for search, want := range map[string]int{"order-10": 10, "account 4411": 1, "REFUND": 5, "nothing like it": 0} {
		res, err := c.SagaList(ctx, &SagaListOpts{Search: search})
		if err != nil || len(res.Sagas) != want {
			t.Fatalf("SagaList(search %q) = %d sagas, %v; want %d", search, len(res.Sagas), err, want)
		}
	}
	counts, err := c.SagaCount(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byState := map[State]int64{}
	for _, sc := range counts {
		byState[sc.State] += sc.Count
	}
	if byState[StateRunning] != 18 || byState[StateNeedsHuman] != 6 || len(byState) != 2 {
		t.Fatalf("SagaCount = %+v: want 18 running (order-124 was deleted), 6 needs_human", counts)
	}
	if counts, err := c.SagaCount(ctx, &SagaListOpts{Search: "4411"}); err != nil || len(counts) != 1 || counts[0].Count != 1 {
		t.Fatalf("SagaCount(search 4411) = %+v, %v", counts, err)
	}
	for _, bad := range []*SagaListOpts{{Limit: -1}, {Limit: MaxListLimit + 1}, {States: []State{"bogus"}}, {After: "not a cursor"}, {OlderThan: -time.Second}} {
		if _, err := c.SagaList(ctx, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SagaList(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	if _, err := c.SagaGet(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SagaGet(unknown) = %v, want ErrNotFound", err)
	}
}
