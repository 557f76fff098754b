package correctnesslease

import (
	"context"
	"errors"
	"testing"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestFailedReleaseCanBeRetried: a Release whose context was already cancelled
// cannot delete the key, and says so; the key stays and a rival is refused. A
// second Release with a good context must try again (guarded by the create
// revision, as always) and free the name, not return the cached error.
func TestFailedReleaseCanBeRetried(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	cfg := Config{Tenant: coordtest.Tenant(t), TTL: testTTL}
	s, rival := newSession(t, cli, cfg), newSession(t, cli, cfg)
	l, err := Acquire(ctx, s, "job")
	if err != nil {
		t.Fatal(err)
	}
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
