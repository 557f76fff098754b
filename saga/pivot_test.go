package saga

import (
	"context"
	"testing"
	"time"
)

// The pivot is recorded when the pivot step commits, and only then: a saga
// that failed before its pivot and compensated never passed it.
func TestPivotRecordedOnlyByThePivotStep(t *testing.T) {
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	run(t, c)
	done, err := Start(context.Background(), c, def, order{}, &StartOpts{ID: "through"})
	if err != nil {
		t.Fatal(err)
	}
	undone, err := Start(context.Background(), c, def, order{FailAt: "charge"}, &StartOpts{ID: "declined"})
	if err != nil {
		t.Fatal(err)
	}
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
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	run(t, c)
	id, err := Start(context.Background(), c, def, order{FailAt: "reserve"}, &StartOpts{ID: "declined-first"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, 30*time.Second, StateCompensated)
	if n := e.p.callCount("reserve/compensate"); n != 1 {
		t.Fatalf("reserve compensated %d times after its business failure, want once", n)
	}
}
