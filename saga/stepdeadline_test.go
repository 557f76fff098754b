package saga

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// Every step call ends before the claim it runs under can expire: its context's
// deadline is a fifth of ClaimTTL short of the claim (the first step's from the
// claim, a later step's or compensation's from the write that renewed it, a
// chained saga's from the commit that claimed it), so a slow step gives
// the claim up instead of overrunning it while another runner takes the saga.
func TestStepDeadlineEndsBeforeTheClaim(t *testing.T) {
	e := newEnv(t)
	cfg := fastConfig()
	cfg.ClaimTTL = 10 * time.Second
	cfg.Concurrency = 1 // one saga at a time: finishing one claims the next in the same commit (chained)
	c, err := NewClient(e.db.Pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var mu sync.Mutex
	left := map[string]time.Duration{} // saga/step → time to its deadline when called
	act := func(ctx context.Context, sc StepContext, o *order) error {
		dl, ok := ctx.Deadline()
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			left[sc.SagaID()+"/"+sc.Step()] = -1
			return nil
		}
		left[sc.SagaID()+"/"+sc.Step()] = time.Until(dl)
		return nil
	}
	comp := func(ctx context.Context, sc StepContext, o *order) error {
		dl, _ := ctx.Deadline()
		mu.Lock()
		defer mu.Unlock()
		left[sc.SagaID()+"/"+sc.Step()+"/undo"] = time.Until(dl)
		return nil
	}
	def, err := New("deadlines", Compensatable("first", act, comp), Pivot("second", act))
	if err != nil {
		t.Fatal(err)
	}
	// The compensations' deadlines: the pivot declines, so b then a are undone.
	undo, err := New("deadlines-undo", Compensatable("a", act, comp), Compensatable("b", act, comp),
		Pivot("c", func(context.Context, StepContext, *order) error { return Fail(errors.New("declined")) }))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*Definition[order]{def, undo} {
		if err := c.Register(d); err != nil {
			t.Fatal(err)
		}
	}
	ids := []string{"s1", "s2", "s3"}
	for _, id := range ids {
		start(t, context.Background(), c, def, order{}, &StartOpts{ID: id})
	}
	start(t, context.Background(), c, undo, order{}, &StartOpts{ID: "u1"})
	run(t, c)
	for _, id := range ids {
		waitState(t, c, id, 30*time.Second, StateCompleted)
	}
	waitState(t, c, "u1", 30*time.Second, StateCompensated)
	mu.Lock()
	defer mu.Unlock()
	calls := map[string][]string{"u1": {"a", "b", "b/undo", "a/undo"}}
	for _, id := range ids {
		calls[id] = []string{"first", "second"}
	}
	for id, steps := range calls {
		for _, step := range steps {
			// At most 8 s (ClaimTTL - ClaimTTL/5) from the claim, and the step is called after it.
			if d := left[id+"/"+step]; d <= 0 || d > cfg.ClaimTTL-cfg.ClaimTTL/5 {
				t.Fatalf("saga %s step %s called with %v to its deadline, want (0, %v]: within the %v claim", id, step, d, cfg.ClaimTTL-cfg.ClaimTTL/5, cfg.ClaimTTL)
			}
		}
	}
}
