package saga

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPausedRunnerIsFenced: runner A stalls after a step's call, past its claim;
// runner B claims the saga and finishes it; when A wakes, its write is rejected
// by the claim_version fence, and the participant saw every effect exactly once.
func TestPausedRunnerIsFenced(t *testing.T) {
	e := newEnv(t)
	cfg := fastConfig()
	cfg.ClaimTTL = 500 * time.Millisecond
	a, def := e.client(t, cfg)
	stalled := make(chan struct{})
	resume := make(chan struct{})
	// Once A reaches step 1's commit, the whole of A stalls (a GC pause, a
	// SIGSTOP): every boundary it reaches blocks until resume.
	var once sync.Once
	var paused atomic.Bool
	a.hook = func(p hookPoint, id string, step int) {
		if p == hookAfterAction && step == 1 {
			once.Do(func() { paused.Store(true); close(stalled) })
		}
		if paused.Load() {
			<-resume
		}
	}
	run(t, a)
	ctx := context.Background()
	id := start(t, ctx, a, def, order{}, nil)
	select {
	case <-stalled:
	case <-time.After(20 * time.Second):
		t.Fatal("runner A never reached step 1")
	}
	time.Sleep(cfg.ClaimTTL + 100*time.Millisecond) // A's claim has expired
	bcfg := fastConfig()
	bcfg.Owner = "runner-b"
	b, _ := (&env{db: e.db, p: e.p}).client(t, bcfg)
	run(t, b)
	waitState(t, b, id, 20*time.Second, StateCompleted)
	close(resume)
	deadline := time.Now().Add(10 * time.Second)
	for a.Stats().FencedWrites == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("A's stale write was not rejected: %+v", a.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	i, err := b.Get(ctx, id)
	if err != nil || i.State != StateCompleted || i.Step != len(fixtureSteps) {
		t.Fatalf("A's stale write changed the saga: %+v %v", i, err)
	}
	// A committed only reserve; every write it tried after the pause was rejected.
	if a.Stats().Steps != 1 || b.Stats().FencedWrites != 0 {
		t.Fatalf("A %+v B %+v", a.Stats(), b.Stats())
	}
	t.Logf("stale writes rejected: %d", a.Stats().FencedWrites)
	got := effects(t, e.db.Pool, id)
	for _, s := range fixtureSteps {
		if got[s+"/action"] != 1 {
			t.Fatalf("effects %v: %s not exactly once", got, s)
		}
	}
	// Both runners called charge; the barrier absorbed the duplicate.
	if n := e.p.callCount("charge/action"); n < 2 {
		t.Fatalf("charge called %d times, want A's call and B's", n)
	}
}
