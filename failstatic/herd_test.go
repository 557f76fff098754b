package failstatic_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// delayLog records every backoff draw of one cache: the ceiling it was drawn
// under and the delay drawn, from a seeded source.
type delayLog struct {
	mu       sync.Mutex
	rng      *rand.Rand
	ceilings []time.Duration
	delays   []time.Duration
}

func (d *delayLog) draw(n int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	v := d.rng.Int64N(n)
	d.ceilings = append(d.ceilings, time.Duration(n))
	d.delays = append(d.delays, time.Duration(v))
	return v
}

func (d *delayLog) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.delays)
}

// TestReconnectHerd runs 100 caches on one fake clock against a real etcd that is
// killed and restarted. Each draws its reconnect delays from a seeded
// coord.Backoff.Rand, so the schedule is deterministic: every cache must walk
// the full-jitter ceilings 100 ms, 200 ms, 400 ms, … in order while etcd is
// down, and the first delays must spread uniformly over [0, 100 ms) instead of
// landing together (no thundering herd). After the restart every cache must
// converge on etcd's state.
func TestReconnectHerd(t *testing.T) {
	const clients, rounds = 100, 6 // ceilings 100 ms … 3.2 s
	res := coordtest.NewResult(t, "100 caches reconnect after etcd restarts (herd)", coordtest.Faults("etcd killed", "etcd restarted"))
	defer coordtest.Report(t, res)
	cluster := coordtest.EtcdCluster(t, 1, nil)
	writer := cluster.Client(t)
	prefix := testPrefix(t)
	put(t, writer, prefix+"a", "1")

	clock := coordtest.NewFakeClock(time.Unix(1_800_000_000, 0))
	logs := make([]*delayLog, clients)
	caches := make([]*failstatic.Cache[conf], clients)
	for i := range clients {
		logs[i] = &delayLog{rng: rand.New(rand.NewPCG(uint64(i), 42))}
		cfg := baseConfig(prefix)
		cfg.Clock = clock
		cfg.Backoff = coord.Backoff{Rand: logs[i].draw}
		cfg.ProbeInterval = time.Second
		cfg.ResetAfter = 3 * time.Second
		// Long enough for the first list of 100 clients on a loaded 2-core
		// machine (300 ms timed out there: a failed first list draws a backoff
		// on the fake clock, which New then waits out); short enough that the
		// opens while etcd is down fail quickly.
		cfg.RequestTimeout = time.Second
		caches[i] = mustNew(t, coordtest.NewEtcdClient(t, cluster.Endpoints()...), cfg)
	}

	cluster.Members[0].Kill()
	// Fake time passes; probes fail, and once the caches have been unconfirmed
	// for ResetAfter each presumes its watch hung and backs off (attempt 0).
	allReached := func(n int) bool {
		for _, l := range logs {
			if l.count() < n {
				return false
			}
		}
		return true
	}
	advanceUntil := func(step time.Duration, n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !allReached(n) {
			if time.Now().After(deadline) {
				t.Fatalf("not every cache drew backoff %d within 60 s", n)
			}
			clock.Advance(step)
			time.Sleep(100 * time.Millisecond) // real time for failing requests to time out
		}
	}
	advanceUntil(time.Second, 1)
	for r := 1; r < rounds; r++ {
		advanceUntil(coord.Backoff{}.Ceiling(r-1), r+1)
	}

	// The schedule: every cache's ceilings are 100 ms · 2ⁿ, delays below them.
	first := make([]time.Duration, clients)
	for i, l := range logs {
		l.mu.Lock()
		first[i] = l.delays[0]
		for n := 0; n < rounds; n++ {
			if want := (coord.Backoff{}).Ceiling(n); l.ceilings[n] != want || l.delays[n] < 0 || l.delays[n] >= want {
				l.mu.Unlock()
				t.Fatalf("cache %d draw %d: ceiling %v delay %v, want ceiling %v", i, n, l.ceilings[n], l.delays[n], want)
			}
		}
		l.mu.Unlock()
	}
	// The spread of the first reconnect: 10 buckets of 10 ms, ~10 each.
	var buckets [10]int
	for _, d := range first {
		buckets[d/(10*time.Millisecond)]++
	}
	t.Logf("first reconnect delays per 10 ms bucket: %v", buckets)
	for b, n := range buckets {
		if n < 3 || n > 20 {
			t.Fatalf("bucket %d has %d of %d reconnects: not uniform (herd)", b, n, clients)
		}
	}
	// Chi-square against uniform, 9 degrees of freedom: 21.67 is the 1 % point.
	var chi float64
	for _, n := range buckets {
		d := float64(n) - clients/10
		chi += d * d / (clients / 10)
	}
	if chi > 21.67 {
		t.Fatalf("chi-square %.1f over 10 buckets: not uniform", chi)
	}

	// etcd comes back; every cache converges.
	if err := cluster.Members[0].Start(); err != nil {
		t.Fatal(err)
	}
	cluster.Members[0].WaitOutput(t, "ready", 60*time.Second)
	put(t, writer, prefix+"b", "2")
	deadline := time.Now().Add(120 * time.Second)
	for {
		live := 0
		for _, c := range caches {
			if s := c.Get(); s.Source == failstatic.SourceLive && s.Value[prefix+"b"] == "2" {
				live++
			}
		}
		if live == clients {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d caches converged after the restart", live, clients)
		}
		clock.Advance(time.Second)
		time.Sleep(50 * time.Millisecond)
	}
	var reconnects int64
	for _, c := range caches {
		if c.Status().Reconnects == 0 {
			t.Fatal("a cache never reconnected")
		}
		reconnects += c.Status().Reconnects
	}
	st := cluster.Members[0].Stats()
	t.Logf("faults: %d kills, %d starts; %d caches, %d reconnects, chi-square %.1f", st.Kills, st.Starts, clients, reconnects, chi)
	res.Trials = clients
	res.Faults["etcd killed"] = st.Kills
	res.Faults["etcd restarted"] = st.Starts - 1
	res.Outcome["caches converged"] = clients
	res.Outcome["reconnects"] = reconnects
	res.Outcome["chi-square x100 (first delays, 10 buckets)"] = int64(chi * 100)
	res.Outcome["backoff rounds checked"] = rounds
	res.Notes = fmt.Sprintf("fake clock, seeded full-jitter backoff; first reconnect delays per 10 ms bucket %v, chi-square %.1f (uniform: below the 1%% point 21.67)", buckets, chi)
	if st.Kills < 1 || st.Starts != 2 {
		t.Fatalf("etcd restart not injected: %+v", st)
	}
}
