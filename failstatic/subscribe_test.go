package failstatic_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A subscriber slower than the updates does not queue them without bound: what
// arrives while it is busy is coalesced into one update — the latest snapshot and,
// per key, its latest change — and counted.
func TestSlowSubscriberIsCoalesced(t *testing.T) {
	_, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"k0", "v")
	c := mustNew(t, cli, baseConfig(prefix))
	start := c.Get().Value

	release := make(chan struct{})
	var (
		mu    sync.Mutex
		calls int
		state = maps.Clone(start)
		last  int64
	)
	done := make(chan struct{}, 1)
	stop := c.Subscribe(func(s failstatic.Snapshot[conf], changes []failstatic.Change) {
		mu.Lock()
		calls++
		first := calls == 1
		for _, ch := range changes {
			if ch.Deleted {
				delete(state, ch.Key)
			} else {
				state[ch.Key] = string(ch.Value)
			}
		}
		last = s.Revision
		mu.Unlock()
		if first {
			<-release // a slow subscriber: busy while the updates below arrive
		}
		select {
		case done <- struct{}{}:
		default:
		}
	})
	defer stop()

	const updates = 60
	var rev int64
	revisions := 0 // the updates that made a revision (deleting a missing key makes none)
	for i := range updates {
		prev := rev
		k := prefix + "k" + strconv.Itoa(i%7)
		if i%5 == 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := cli.Delete(ctx, k)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		} else {
			rev = put(t, cli, k, strconv.Itoa(i))
		}
		// One adoption per update: unpaced, a loaded machine's watch delivered the
		// updates in two or three batches, adopted as that many snapshots, and
		// there was nothing to coalesce (Coalesced = 0).
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("the cache to adopt update %d (revision %d)", i, rev), func() bool { return c.Get().Revision >= rev })
		if rev > prev {
			revisions++
		}
	}
	close(release)
	coordtest.Until(t, 30*time.Second, 5*time.Millisecond, "the subscriber to receive the last update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return last >= rev
	})
	want, _ := etcdState(t, cli, prefix)
	mu.Lock()
	defer mu.Unlock()
	if calls > 3 {
		t.Fatalf("subscriber called %d times for %d updates while it was busy: not coalesced", calls, updates)
	}
	if !equalConf(state, want) {
		t.Fatalf("state rebuilt from the coalesced changes %v, want %v", state, want)
	}
	// The first revision's call held the subscriber; of the other revisions, at
	// most one found nothing pending: every other was merged.
	if n := c.Status().Coalesced; n < int64(revisions-2) {
		t.Fatalf("Status().Coalesced = %d after %d revisions adopted one by one and %d calls: the merges are not counted", n, revisions, calls)
	}
}
