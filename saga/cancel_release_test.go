package saga

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestCancelAfterReleasedAttemptCompensatesIt: a runner that stops while a step's
// call is in flight releases its claim without recording the attempt, but the
// participant may already have applied the effect. Cancel must still compensate
// that step (the barrier makes it a no-op if the action never ran); otherwise the
// effect is never undone.
func TestCancelAfterReleasedAttemptCompensatesIt(t *testing.T) {
	e := newEnv(t)
	charged := make(chan struct{})
	var once sync.Once
	chargeAct := e.p.action("reserve")
	def, err := New("order",
		Compensatable("reserve", e.p.action(""), e.p.compensation()),
		Compensatable("charge", func(ctx context.Context, sc StepContext, o *order) error {
			// The participant commits the charge, then the runner is stopped
			// before the call returns.
			if err := chargeAct(context.WithoutCancel(ctx), sc, o); err != nil {
				return err
			}
			once.Do(func() { close(charged) })
			<-ctx.Done()
			return ctx.Err()
		}, e.p.compensation()),
		Pivot("ship", e.p.action("charge")),
	)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(e.db.Pool, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Register(def); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := start(t, ctx, c, def, order{}, nil)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()
	select {
	case <-charged:
	case <-time.After(20 * time.Second):
		stop()
		t.Fatal("charge never ran")
	}
	stop()
	if err := coordtest.Recv(t, done, 30*time.Second, "Run returning after its context was cancelled"); err != nil {
		t.Fatal(err)
	}
	if got := effects(t, e.db.Pool, id); got["charge/action"] != 1 {
		t.Fatalf("fault not injected: effects %v", got)
	}
	if err := c.Cancel(ctx, id, "customer changed their mind"); err != nil {
		t.Fatal(err)
	}
	run(t, c)
	i := waitState(t, c, id, 20*time.Second, StateCompensated, StateNeedsHuman, StateCompleted)
	if i.State != StateCompensated {
		t.Fatalf("cancelled saga %+v", i)
	}
	got := effects(t, e.db.Pool, id)
	if got["charge/action"] != 1 || got["charge/compensate"] != 1 || got["reserve/compensate"] != 1 {
		t.Fatalf("effects %v: the charge that was applied must be compensated", got)
	}
}
