package efficiencylock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/efficiencylock"
)

// TestRefreshSetsTheServerTTL: Refresh(d) leaves the key in Redis with d to live
// (measured on the server, not by the guard's own clock): never longer, so a
// crashed holder's lock is gone d after its last refresh.
func TestRefreshSetsTheServerTTL(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	lk := held(t, ctx, l, "server-ttl", 10*time.Second, nil)
	for _, d := range []time.Duration{5 * time.Second, 300 * time.Millisecond, 2 * time.Second} {
		if err := lk.Refresh(ctx, d); err != nil {
			t.Fatalf("Refresh(%v): %v", d, err)
		}
		pttl, err := db.Client.PTTL(ctx, lk.Key()).Result()
		if err != nil {
			t.Fatal(err)
		}
		// At most d; at least half of it (a round trip on a loaded machine).
		if pttl > d || pttl < d/2 {
			t.Fatalf("after Refresh(%v) the key's PTTL on the server is %v", d, pttl)
		}
	}
}

// TestRefreshLeavesAnotherOwnersLockIntact: the key now holds another
// acquisition's value while the old guard still believes it is valid, and the
// old guard's Refresh reaches Redis (nothing has told it yet). The refresh script
// must compare before it extends: the other owner's value and TTL stay as they
// were, and the old guard learns it lost the lock.
func TestRefreshLeavesAnotherOwnersLockIntact(t *testing.T) {
	t.Parallel()
	l, db := sharedLocker(t, efficiencylock.Config{})
	ctx := ctxT(t, 10*time.Second)
	old, err := l.TryAcquire(ctx, "o", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Another acquisition owns the key now (expiry and re-acquire, or a failover).
	if err := db.Client.Set(ctx, old.Key(), "another-acquisition", 3*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	var lost *efficiencylock.LostError
	if err := old.Refresh(ctx, time.Minute); !errors.As(err, &lost) || lost.Reason != efficiencylock.LossGone {
		t.Fatalf("Refresh of another owner's lock = %v, want *LostError gone", err)
	}
	if got := db.Client.Get(ctx, old.Key()).Val(); got != "another-acquisition" {
		t.Fatalf("the other owner's value changed to %q", got)
	}
	if d := db.Client.PTTL(ctx, old.Key()).Val(); d <= 0 || d > 3*time.Second {
		t.Fatalf("the other owner's PTTL = %v, want at most 3s (not extended)", d)
	}
	if c := context.Cause(old.Context()); !errors.Is(c, efficiencylock.ErrLockLost) {
		t.Fatalf("Context cause = %v, want ErrLockLost", c)
	}
}
