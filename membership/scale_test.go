package membership_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestManyRegistrationsOneTenant: registrations from many sessions on one
// tenant (10,000 from 100 sessions under COORD_FULL=1, 1,000 from 10 by
// default), each session on its own client. It logs the put latency of
// Register and the fan-out latency to 3 watchers (Register returned → the
// instance in a watcher's view), and checks the keepalive traffic counted at
// the gRPC layer: one RPC per session per TTL/3, however many registrations.
// It injects no fault, so it is a load test, not a coordtest.Result scenario.
func TestManyRegistrationsOneTenant(t *testing.T) {
	sessionsN := coordtest.Pick(10, 100)
	const per = 100
	n := sessionsN * per
	t.Parallel()
	e := coordtest.Etcd(t)
	tenant := coordtest.Tenant(t)
	// A longer TTL in the full tier: 10,000 registrations under -race load the
	// embedded etcd enough to delay keepalives past a 3 s lease.
	ttl := coordtest.Pick(3*time.Second, 10*time.Second)

	// Watchers first: fan-out is measured from each instance's registration.
	type seen struct {
		mu sync.Mutex
		at map[string]time.Time
	}
	watchers := make([]*membership.Watcher, 3)
	seens := make([]*seen, len(watchers))
	var wg sync.WaitGroup
	for i := range watchers {
		watchers[i] = watch(t, e.Client(t), tenant, "api", &membership.WatchConfig{Logger: quiet})
		seens[i] = &seen{at: map[string]time.Time{}}
		wg.Add(1)
		go func(w *membership.Watcher, s *seen) {
			defer wg.Done()
			for v := range w.Updates() {
				now := time.Now()
				s.mu.Lock()
				for _, m := range v.Members {
					if _, ok := s.at[m.Instance]; !ok {
						s.at[m.Instance] = now
					}
				}
				full := len(s.at) == n
				s.mu.Unlock()
				if full {
					return
				}
			}
		}(watchers[i], seens[i])
	}

	counters := make([]*coordtest.RPCCounter, sessionsN)
	sessions := make([]*membership.Session, sessionsN)
	for i := range sessions {
		cli, rc := coordtest.CountingEtcdClient(t, e.Endpoints...)
		counters[i] = rc
		s, err := membership.NewSession(context.Background(), cli, membership.SessionConfig{TTL: ttl, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		atEnd(t, s.Close)
		sessions[i] = s
	}
	puts := make([]time.Duration, n)
	registered := make([]time.Time, n)
	var rwg sync.WaitGroup
	start := time.Now()
	for si, s := range sessions {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for j := range per {
				i := si*per + j
				t0 := time.Now()
				_, err := s.Register(context.Background(), membership.Config{Tenant: tenant, Service: "api", Instance: fmt.Sprintf("i%05d", i)})
				if err != nil {
					t.Error(err)
					return
				}
				registered[i] = time.Now()
				puts[i] = registered[i].Sub(t0)
			}
		}()
	}
	coordtest.Wait(t, &rwg, 120*time.Second, "the registrations")
	if t.Failed() {
		t.FailNow()
	}
	regTook := time.Since(start)
	coordtest.Wait(t, &wg, 60*time.Second, "the watchers seeing every registration")
	var fan []time.Duration
	for _, s := range seens {
		for i := range n {
			fan = append(fan, max(0, s.at[fmt.Sprintf("i%05d", i)].Sub(registered[i])))
		}
	}
	slices.Sort(puts)
	slices.Sort(fan)
	pct := func(d []time.Duration, p int) time.Duration { return d[min(len(d)-1, len(d)*p/100)] }

	// Keepalive traffic over a quiet window of 2 TTLs.
	var before int64
	for _, c := range counters {
		before += c.Count("/LeaseKeepAlive")
	}
	window := 2 * ttl
	time.Sleep(window)
	var during int64
	for _, c := range counters {
		during += c.Count("/LeaseKeepAlive")
	}
	during -= before
	periods := int64(window / (ttl / 3))
	lo, hi := int64(sessionsN)*(periods-1), int64(sessionsN)*(periods+1)

	t.Logf("%d registrations from %d sessions in %v: Register p50 %v p99 %v; fan-out to 3 watchers p50 %v p99 %v max %v; keepalive RPCs in %v: %d (expected %d ±%d)",
		n, sessionsN, regTook.Round(time.Millisecond), pct(puts, 50), pct(puts, 99), pct(fan, 50), pct(fan, 99), fan[len(fan)-1], window, during, int64(sessionsN)*periods, sessionsN)
	if during < lo || during > hi {
		t.Fatalf("keepalive RPCs in %v: %d, want %d..%d (one per session per TTL/3)", window, during, lo, hi)
	}
}
