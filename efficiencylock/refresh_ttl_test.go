package efficiencylock_test

import (
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
	lk, err := l.TryAcquire(ctx, "server-ttl", 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	releaseAtEnd(t, lk)
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
