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
