package saga

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The pivot is recorded when the pivot step commits, and only then: a saga
// that failed before its pivot and compensated never passed it.
func TestPivotRecordedOnlyByThePivotStep(t *testing.T) {
	_, c, def := newFastClient(t)
	run(t, c)
	done := start(t, context.Background(), c, def, order{}, &StartOpts{ID: "through"})
	undone := start(t, context.Background(), c, def, order{FailAt: "charge"}, &StartOpts{ID: "declined"})
	if i := waitState(t, c, done, 30*time.Second, StateCompleted); i.PivotAt == nil {
		t.Fatalf("completed saga %+v: PivotAt nil, want the pivot's commit time", i)
	}
	if i := waitState(t, c, undone, 30*time.Second, StateCompensated); i.PivotAt != nil {
		t.Fatalf("saga compensated before its pivot: PivotAt %v, want nil", i.PivotAt)
	}
}

// A business failure of the first step, a compensatable one, still compensates
// that step (an earlier attempt may have taken effect; the barrier makes the
// compensation of an action that never ran a no-op) before the saga ends
// compensated.
func TestBusinessFailureOfTheFirstStepCompensatesIt(t *testing.T) {
	e, c, def := newFastClient(t)
	run(t, c)
	id := start(t, context.Background(), c, def, order{FailAt: "reserve"}, &StartOpts{ID: "declined-first"})
	waitState(t, c, id, 30*time.Second, StateCompensated)
	if n := e.p.callCount("reserve/compensate"); n != 1 {
		t.Fatalf("reserve compensated %d times after its business failure, want once", n)
	}
}

// A failed attempt's retry is scheduled with the backoff of that attempt: the
// first retry of a step is drawn under Backoff's first ceiling (Base), not the
// second. Here every draw is the ceiling's top, so the delay is exactly Base.
func TestFirstRetryIsDrawnUnderTheFirstCeiling(t *testing.T) {
	e := newEnv(t)
	cfg := fastConfig()
	cfg.Backoff = coord.Backoff{Base: time.Hour, Cap: 8 * time.Hour, Rand: func(n int64) int64 { return n - 1 }}
	c, def := e.client(t, cfg)
	run(t, c)
	before := time.Now()
	id, err := Start(context.Background(), c, def, order{FlakyAt: "reserve"}, &StartOpts{ID: "flaky-first"})
	if err != nil {
		t.Fatal(err)
	}
	var i Info
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the first failed attempt recorded", func() bool {
		i, err = c.Get(context.Background(), id)
		return err == nil && i.Attempts == 1
	})
	if wait := i.NextAttemptAt.Sub(before); wait < 59*time.Minute || wait > 61*time.Minute {
		t.Fatalf("first retry due %v after the start, want Base (1h): the first ceiling", wait)
	}
}
