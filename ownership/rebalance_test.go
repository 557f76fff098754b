package ownership_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRebalanceBound: members join one by one up to N and then leave down to
// 2 (P=24, N=4 bounded; P=1000, N=10 under COORD_FULL). After every step the
// group settles with every partition held once, balanced, and the step revoked
// at most ⌈P/N⌉+1 partitions (N the larger member count), all of them from the
// leaver on a leave and all of them to the joiner on a join.
func TestRebalanceBound(t *testing.T) {
	p, n := coordtest.Pick(24, 1000), coordtest.Pick(4, 10)
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p})
	var live []*node
	revokes := func() map[*node]int {
		out := map[*node]int{}
		for _, x := range live {
			out[x] = len(x.revokes())
		}
		return out
	}
	settle := func(step string, before map[*node]int, changed *node, joined bool) {
		t.Helper()
		// Loads are ⌊P/N⌋ or one more.
		start := time.Now()
		coordtest.Until(t, 60*time.Second, 20*time.Millisecond, step+": every partition held once, balanced", func() bool {
			total, lo, hi := 0, p, 0
			for _, x := range live {
				k := len(x.m.Owned())
				total += k
				lo, hi = min(lo, k), max(hi, k)
			}
			return total == p && hi-lo <= 1 && ownedOnce(live, p)
		})
		took := time.Since(start)
		after := revokes()
		moved := 0
		for _, x := range live {
			d := after[x] - before[x]
			moved += d
			if joined && d > 0 && x == changed {
				t.Errorf("%s: the joiner revoked %d partitions", step, d)
			}
			if !joined && d > 0 {
				t.Errorf("%s: member %s that stays revoked %d partitions", step, x.m.ID(), d)
			}
		}
		if !joined {
			moved = before[changed] // the leaver's revokes are its partitions
		}
		big := len(live)
		if !joined {
			big++
		}
		if bound := (p+big-1)/big + 1; moved > bound {
			t.Errorf("%s: %d partitions moved > ⌈P/N⌉+1 = %d", step, moved, bound)
		}
		t.Logf("%s: %d members, %d moved, settled in %v", step, len(live), moved, took.Round(time.Millisecond))
	}
	for i := 0; i < n; i++ {
		before := revokes()
		x := join(t, g, cli, tenant, 0)
		live = append(live, x)
		settle("join", before, x, true)
	}
	for len(live) > 2 {
		before := revokes()
		x := live[0]
		before[x] = len(x.m.Owned())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := x.m.Leave(ctx); err != nil {
			t.Fatalf("Leave: %v", err)
		}
		cancel()
		live = live[1:]
		settle("leave", before, x, false)
	}
}

// ownedOnce reports whether the members hold every partition exactly once.
func ownedOnce(ns []*node, p int) bool {
	seen := make([]bool, p)
	for _, x := range ns {
		for _, part := range x.m.Owned() {
			if seen[part.ID()] {
				return false
			}
			seen[part.ID()] = true
		}
	}
	for _, s := range seen {
		if !s {
			return false
		}
	}
	return true
}
