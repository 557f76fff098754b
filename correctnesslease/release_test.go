package correctnesslease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestFailedReleaseCanBeRetried: a Release whose context was already cancelled
// cannot delete the key, and says so; the key stays and a rival is refused. A
// second Release with a good context must try again (guarded by the create
// revision, as always) and free the name, not return the cached error.
func TestFailedReleaseCanBeRetried(t *testing.T) {
	cli, s, rival := twoSessions(t)
	ctx := context.Background()
	l := mustAcquire(ctx, t, s, "job")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Release(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Release with a cancelled context = %v, want context.Canceled", err)
	}
	waitKeys(t, cli, l.Token().Lease()+"/", 1) // the key is still there
	if _, err := TryAcquire(ctx, rival, "job"); !errors.Is(err, ErrHeld) {
		t.Fatalf("rival TryAcquire after the failed Release = %v, want ErrHeld", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("retried Release = %v, want nil", err)
	}
	waitKeys(t, cli, l.Token().Lease()+"/", 0)
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after a successful one = %v, want nil", err)
	}
	r, err := TryAcquire(ctx, rival, "job")
	if err != nil {
		t.Fatalf("rival TryAcquire after the retried Release: %v", err)
	}
	_ = r.Release(ctx)
}

// TestConcurrentReleaseReturnsFirstResult: Release promises that later calls
// return the first call's result. A second Release made while the first is still
// trying to delete the key (etcd unreachable) must not report success before the
// first has finished: it returns the first call's error.
func TestConcurrentReleaseReturnsFirstResult(t *testing.T) {
	s, proxy := proxiedSession(t)
	l, err := Acquire(context.Background(), s, "job")
	if err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole()
	defer proxy.Heal()

	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		first <- l.Release(ctx)
	}()
	// Release gives up authority before its delete RPC: wait for that, so the
	// second call runs while the first is in flight.
	coordtest.Recv(t, l.Context().Done(), 5*time.Second, "first Release's loss of authority")
	if proxy.Stats().Blackholes == 0 {
		t.Fatal("the connection was never blackholed")
	}
	second := l.Release(context.Background())
	err1 := coordtest.Recv(t, first, 30*time.Second, "the first Release returning")
	if err1 == nil {
		t.Fatal("first Release succeeded through a blackholed connection")
	}
	if second == nil || second.Error() != err1.Error() {
		t.Fatalf("second Release returned %v while the first returned %v", second, err1)
	}
}
