package efficiencylock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestAcquireReleaseKeyLayout(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)

	lk, err := l.TryAcquire(ctx, "job-1", 5*time.Second, nil)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	want := "/tenants/" + db.Tenant + "/locks/job-1"
	if lk.Key() != want || lk.Name() != "job-1" {
		t.Fatalf("Key, Name = %q, %q; want %q, job-1", lk.Key(), lk.Name(), want)
	}
	v1, err := db.Client.Get(ctx, want).Result()
	if err != nil || len(v1) < 16 {
		t.Fatalf("GET %s = %q, %v; want a random value", want, v1, err)
	}
	pttl := db.Client.PTTL(ctx, want).Val()
	if pttl <= 0 || pttl > 5*time.Second {
		t.Fatalf("PTTL = %v, want (0, 5s]", pttl)
	}
	if d, err := lk.TTL(ctx); err != nil || d <= 0 || d > 5*time.Second {
		t.Fatalf("TTL = %v, %v", d, err)
	}
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := db.Client.Exists(ctx, want).Val(); n != 0 {
		t.Fatalf("key still exists after Release")
	}
	if err := lk.Release(ctx); !errors.Is(err, efficiencylock.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	if err := lk.Refresh(ctx, time.Second); !errors.Is(err, efficiencylock.ErrNotHeld) {
		t.Fatalf("Refresh after Release = %v, want ErrNotHeld", err)
	}
	if c := context.Cause(lk.Context()); !errors.Is(c, efficiencylock.ErrReleased) {
		t.Fatalf("Context cause after Release = %v, want ErrReleased", c)
	}

	// A second acquisition gets a different random value.
	lk2, err := l.TryAcquire(ctx, "job-1", 5*time.Second, nil)
	if err != nil {
		t.Fatalf("TryAcquire again: %v", err)
	}
	defer lk2.Release(ctx)
	if v2 := db.Client.Get(ctx, want).Val(); v2 == v1 {
		t.Fatalf("two acquisitions share the value %q", v1)
	}
}

func TestContention(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 20*time.Second)
	a := held(t, ctx, l, "busy", 10*time.Second, nil)

	_, err := l.TryAcquire(ctx, "busy", time.Second, nil)
	var na *efficiencylock.NotAcquiredError
	if !errors.As(err, &na) || !errors.Is(err, efficiencylock.ErrNotAcquired) || na.Attempts != 1 {
		t.Fatalf("TryAcquire on a held lock = %v, want *NotAcquiredError after 1 attempt", err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ErrNotAcquired matches a context error: %v", err)
	}

	_, err = l.Acquire(ctx, "busy", time.Second, &efficiencylock.LockOpts{Retry: efficiencylock.LimitRetry(coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}, 3)})
	if !errors.As(err, &na) || na.Attempts != 4 {
		t.Fatalf("Acquire with LimitRetry(3) = %v, want not acquired after 4 attempts", err)
	}

	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	_, err = l.Acquire(short, "busy", time.Second, nil)
	if !errors.Is(err, efficiencylock.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire until deadline = %v, want ErrNotAcquired joined with DeadlineExceeded", err)
	}

	// A waiter gets the lock soon after the holder releases it.
	go func() {
		time.Sleep(100 * time.Millisecond)
		a.Release(ctx)
	}()
	b, err := l.Acquire(ctx, "busy", time.Second, nil)
	if err != nil {
		t.Fatalf("Acquire after release: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, acquire := range []func() error{
		func() error { _, err := l.TryAcquire(ctx, "c", time.Second, nil); return err },
		func() error { _, err := l.Acquire(ctx, "c", time.Second, nil); return err },
	} {
		err := acquire()
		if !errors.Is(err, context.Canceled) || errors.Is(err, efficiencylock.ErrNotAcquired) {
			t.Fatalf("acquire with a cancelled context = %v, want context.Canceled only", err)
		}
	}
	if n := db.Client.Exists(context.Background(), "/tenants/"+db.Tenant+"/locks/c").Val(); n != 0 {
		t.Fatal("a cancelled acquisition wrote the key")
	}

	// A guard refreshed with a cancelled context keeps its lock.
	lk, err := l.TryAcquire(ctxT(t, 5*time.Second), "c", 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Refresh(ctx, time.Second); !errors.Is(err, context.Canceled) || errors.Is(err, efficiencylock.ErrLockLost) {
		t.Fatalf("Refresh(cancelled) = %v, want context.Canceled, not lost", err)
	}
	if lk.Context().Err() != nil {
		t.Fatal("a cancelled Refresh ended the guard")
	}
	if err := lk.Release(ctx); !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("Release(cancelled) = %v", err)
	}
	if err := lk.Release(context.Background()); err != nil {
		t.Fatalf("Release after a cancelled Release = %v, want nil", err)
	}
}

func TestRefreshExtendsAndNeverReacquires(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	lk := held(t, ctx, l, "r", 200*time.Millisecond, nil)
	if err := lk.Refresh(ctx, 5*time.Second); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
	if d, err := lk.TTL(ctx); err != nil || d <= time.Second {
		t.Fatalf("TTL after Refresh(5s) = %v, %v", d, err)
	}
	// The key disappears (expiry, failover to an empty replica): Refresh must not
	// re-create it.
	db.Client.Del(ctx, lk.Key())
	err := lk.Refresh(ctx, 5*time.Second)
	var lost *efficiencylock.LostError
	if !errors.As(err, &lost) || lost.Reason != efficiencylock.LossGone {
		t.Fatalf("Refresh of a vanished key = %v, want *LostError gone", err)
	}
	if n := db.Client.Exists(ctx, lk.Key()).Val(); n != 0 {
		t.Fatal("Refresh re-created an expired lock")
	}
	if c := context.Cause(lk.Context()); !errors.Is(c, efficiencylock.ErrLockLost) {
		t.Fatalf("Context cause = %v, want ErrLockLost", c)
	}
}

// After expiry, another owner acquires; the old guard's Refresh and Release fail
// with typed errors and leave the new owner's lock intact.
func TestAfterExpiryAnotherOwner(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	old, err := l.TryAcquire(ctx, "x", 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	other, err := l.TryAcquire(ctx, "x", 10*time.Second, nil)
	if err != nil {
		t.Fatalf("other owner: %v", err)
	}
	defer other.Release(ctx)
	val := db.Client.Get(ctx, other.Key()).Val()

	var lost *efficiencylock.LostError
	if err := old.Refresh(ctx, 10*time.Second); !errors.As(err, &lost) || lost.Reason != efficiencylock.LossExpired {
		t.Fatalf("Refresh after expiry = %v, want *LostError expired", err)
	}
	if _, err := old.TTL(ctx); !errors.Is(err, efficiencylock.ErrLockLost) {
		t.Fatalf("TTL after expiry = %v, want ErrLockLost", err)
	}
	var nh *efficiencylock.NotHeldError
	if err := old.Release(ctx); !errors.As(err, &nh) {
		t.Fatalf("Release after expiry = %v, want *NotHeldError", err)
	}
	if got := db.Client.Get(ctx, other.Key()).Val(); got != val {
		t.Fatalf("the other owner's value changed: %q → %q", val, got)
	}
	if d, err := other.TTL(ctx); err != nil || d <= 5*time.Second {
		t.Fatalf("other owner's TTL = %v, %v; want intact", d, err)
	}
}

// The key is replaced by another owner while the old guard still believes it is
// valid (Redis restarted empty and someone acquired): Redis says "not yours".
func TestStolenKeyServerSide(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	old, err := l.TryAcquire(ctx, "s", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Client.Del(ctx, old.Key())
	other, err := l.TryAcquire(ctx, "s", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	val := db.Client.Get(ctx, other.Key()).Val()

	var lost *efficiencylock.LostError
	if _, err := old.TTL(ctx); !errors.As(err, &lost) || lost.Reason != efficiencylock.LossGone {
		t.Fatalf("TTL of a stolen lock = %v, want *LostError gone", err)
	}
	if err := old.Refresh(ctx, time.Minute); !errors.Is(err, efficiencylock.ErrLockLost) {
		t.Fatalf("Refresh of a stolen lock = %v, want ErrLockLost", err)
	}
	if err := old.Release(ctx); !errors.Is(err, efficiencylock.ErrNotHeld) {
		t.Fatalf("Release of a stolen lock = %v, want ErrNotHeld", err)
	}
	if got := db.Client.Get(ctx, other.Key()).Val(); got != val {
		t.Fatalf("the other owner's lock was touched: %q → %q", val, got)
	}
	if d := db.Client.PTTL(ctx, other.Key()).Val(); d <= 5*time.Second || d > 10*time.Second {
		t.Fatalf("the other owner's PTTL changed: %v", d)
	}
}

func TestContextEndsAtExpiryWithoutRefresh(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	lk := held(t, ctx, l, "e", 100*time.Millisecond, nil)
	start := time.Now()
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("Context not cancelled at expiry")
	}
	var lost *efficiencylock.LostError
	if c := context.Cause(lk.Context()); !errors.As(c, &lost) || lost.Reason != efficiencylock.LossExpired {
		t.Fatalf("cause = %v, want *LostError expired", c)
	}
	t.Logf("context of a 100ms lock ended %v after the first Context call", time.Since(start))
}

func TestAutoRefresh(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{AutoRefresh: true})
	ctx := ctxT(t, 20*time.Second)
	const ttl = 300 * time.Millisecond
	lk, err := l.TryAcquire(ctx, "auto", ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * ttl)
	if err := lk.Context().Err(); err != nil {
		t.Fatalf("auto-refreshed guard ended: %v", context.Cause(lk.Context()))
	}
	if d, err := lk.TTL(ctx); err != nil || d <= 0 {
		t.Fatalf("TTL after 4×ttl with auto-refresh = %v, %v", d, err)
	}

	// Another owner takes over the key (failover to an empty replica, then an
	// acquisition): the guard learns within one refresh period.
	if err := db.Client.Set(ctx, lk.Key(), "someone-else", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	stolen := time.Now()
	coordtest.Recv(t, lk.Context().Done(), 5*time.Second, "the guard learning its lock was taken over")
	took := time.Since(stolen)
	var lost *efficiencylock.LostError
	if c := context.Cause(lk.Context()); !errors.As(c, &lost) || lost.Reason != efficiencylock.LossGone {
		t.Fatalf("cause = %v, want *LostError gone", c)
	}
	t.Logf("takeover noticed after %v (refresh period %v)", took, ttl/3)
	if took > ttl/3+500*time.Millisecond {
		t.Errorf("takeover noticed after %v, more than one refresh period (%v) plus 500ms scheduling slack", took, ttl/3)
	}
	if err := lk.Release(ctx); !errors.Is(err, efficiencylock.ErrNotHeld) {
		t.Fatalf("Release of a taken-over lock = %v, want ErrNotHeld", err)
	}
	if v := db.Client.Get(ctx, lk.Key()).Val(); v != "someone-else" {
		t.Fatalf("the other owner's value = %q, want intact", v)
	}

	// Per-acquisition opts turn it off.
	off := held(t, ctx, l, "manual", 150*time.Millisecond, &efficiencylock.LockOpts{AutoRefresh: ptr(false)})
	coordtest.Recv(t, off.Context().Done(), 5*time.Second, "the expiry of a guard without auto-refresh")
}

// Without faults, the lock excludes: many goroutines, one holder at a time.
func TestMutualExclusionWithoutFaults(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 30*time.Second)
	var inside, maxInside, runs atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				lk, err := l.Acquire(ctx, "mx", 5*time.Second, &efficiencylock.LockOpts{Retry: coord.Backoff{Base: time.Millisecond, Cap: 20 * time.Millisecond}})
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				n := inside.Add(1)
				if n > maxInside.Load() {
					maxInside.Store(n)
				}
				runs.Add(1)
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := lk.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	coordtest.Wait(t, &wg, 60*time.Second, "the workers taking turns on the lock")
	if maxInside.Load() != 1 || runs.Load() != 80 {
		t.Fatalf("max holders %d over %d runs, want 1 over 80", maxInside.Load(), runs.Load())
	}
}

// Every method of one guard called concurrently (run under -race).
func TestGuardConcurrentUse(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{AutoRefresh: true})
	ctx := ctxT(t, 20*time.Second)
	lk, err := l.TryAcquire(ctx, "cc", 500*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var releasedOK atomic.Int64
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				switch (i + j) % 4 {
				case 0:
					_ = lk.Refresh(ctx, 500*time.Millisecond)
				case 1:
					_, _ = lk.TTL(ctx)
				case 2:
					_ = lk.Context().Err()
				case 3:
					if j > 15 && lk.Release(ctx) == nil {
						releasedOK.Add(1)
					}
				}
			}
		})
	}
	coordtest.Wait(t, &wg, 60*time.Second, "the goroutines sharing one guard")
	if err := lk.Release(ctx); err == nil {
		releasedOK.Add(1)
	} else {
		t.Logf("final Release: %v (cause %v)", err, context.Cause(lk.Context()))
	}
	if releasedOK.Load() != 1 {
		t.Fatalf("%d successful Releases, want exactly 1", releasedOK.Load())
	}
	if !errors.Is(context.Cause(lk.Context()), efficiencylock.ErrReleased) {
		t.Fatalf("cause = %v", context.Cause(lk.Context()))
	}
}

// A Refresh with a shorter ttl shortens the guard's validity too.
func TestRefreshShorterTTLShortensValidity(t *testing.T) {
	t.Parallel()
	l, _ := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	lk := held(t, ctx, l, "short", 10*time.Second, nil)
	lctx := lk.Context()
	if err := lk.Refresh(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	coordtest.Recv(t, lctx.Done(), 5*time.Second, "the guard ending after a Refresh to 100ms")
	if !errors.Is(context.Cause(lctx), efficiencylock.ErrLockLost) {
		t.Fatalf("cause = %v", context.Cause(lctx))
	}
}
