package efficiencylock_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func newLocker(t testing.TB, c efficiencylock.Client, tenant string, cfg efficiencylock.Config) *efficiencylock.Locker {
	t.Helper()
	cfg.Tenant = tenant
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	l, err := efficiencylock.New(c, efficiencylock.DuplicatesHarmless("test: a duplicate run only costs time"), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

func sharedLocker(t testing.TB, cfg efficiencylock.Config) (*efficiencylock.Locker, *coordtest.RedisDB) {
	t.Helper()
	db := coordtest.Redis(t)
	return newLocker(t, db.Client, db.Tenant, cfg), db
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func ptr[T any](v T) *T { return &v }

// held acquires name with TryAcquire, failing the test if it is not acquired,
// and releases it at the end of the test.
func held(t testing.TB, ctx context.Context, l *efficiencylock.Locker, name string, ttl time.Duration, opts *efficiencylock.LockOpts) *efficiencylock.Lock {
	t.Helper()
	lk, err := l.TryAcquire(ctx, name, ttl, opts)
	if err != nil {
		t.Fatalf("TryAcquire %s: %v", name, err)
	}
	releaseAtEnd(t, lk)
	return lk
}

// releaseAtEnd releases lk at the end of the test, tolerating "not held".
func releaseAtEnd(t testing.TB, lk *efficiencylock.Lock) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = lk.Release(ctx)
	})
}
