package membership_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// fleetOf registers n instances of tenant/service on sessions of per
// registrations each, every session on its own client.
func fleetOf(t testing.TB, endpoints []string, tenant, service string, n, per int, ttl time.Duration) ([]*membership.Session, []*membership.Registration) {
	t.Helper()
	ctx := context.Background()
	var sessions []*membership.Session
	var regs []*membership.Registration
	for i := 0; i < n; i++ {
		if i%per == 0 {
			s, err := membership.NewSession(ctx, coordtest.NewEtcdClient(t, endpoints...), membership.SessionConfig{TTL: ttl, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			atEnd(t, s.Close)
			sessions = append(sessions, s)
		}
		r, err := sessions[len(sessions)-1].Register(ctx, membership.Config{Tenant: tenant, Service: service, Instance: fmt.Sprintf("i%05d", i)})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	return sessions, regs
}

// TestWatcherBlackholedDuringChurnAndCompaction: the watcher's connection is
// blackholed (bytes vanish, the connection stays open) while a fleet of 1,000
// instances churns — instances leave, join and update — and etcd's history is
// compacted past the watcher's revision. After the heal, the view must equal
// etcd's exact set, having re-listed exactly once per compaction.
func TestWatcherBlackholedDuringChurnAndCompaction(t *testing.T) {
	res := coordtest.NewResult(t, "watcher blackholed while 1,000 instances churn and history is compacted: converges, one re-list per compaction",
		coordtest.Faults("watcher connection blackholed", "history compacted past the watcher"))
	defer coordtest.Report(t, res)
	t.Parallel()
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	const n, per = 1000, 100
	sessions, regs := fleetOf(t, e.Endpoints, tenant, "api", n, per, 10*time.Second)

	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	m := newMetrics(t)
	w := watch(t, coordtest.NewEtcdClient(t, proxy.URL()), tenant, "api", &membership.WatchConfig{
		ProbeInterval: 200 * time.Millisecond, StaleAfter: time.Second, ResetAfter: time.Second, ReadTimeout: time.Second, MeterProvider: m, Logger: quiet})
	coordtest.Until(t, 30*time.Second, 5*time.Millisecond, "initial view", func() bool { return viewEqualsTruth(t, w, cli, tenant) })

	rounds := coordtest.Pick(2, 6)
	rng := rand.New(rand.NewPCG(1, 2))
	next := n
	for round := range rounds {
		relists := m.sum("coordkit.membership.relists")
		holes := proxy.Stats().Blackholes
		proxy.Blackhole()
		res.Faults["watcher connection blackholed"] += proxy.Stats().Blackholes - holes
		// Churn: 100 leave, 100 join, 100 update their metadata.
		for range 100 {
			i := rng.IntN(len(regs))
			if err := regs[i].Deregister(context.Background()); err != nil {
				t.Fatal(err)
			}
			regs = append(regs[:i], regs[i+1:]...)
			res.Outcome["churn: left"]++
		}
		for range 100 {
			s := sessions[rng.IntN(len(sessions))]
			r, err := s.Register(context.Background(), membership.Config{Tenant: tenant, Service: "api", Instance: fmt.Sprintf("i%05d", next)})
			if err != nil {
				t.Fatal(err)
			}
			next++
			regs = append(regs, r)
			res.Outcome["churn: joined"]++
		}
		for range 100 {
			if err := regs[rng.IntN(len(regs))].Update(context.Background(), map[string]string{"round": fmt.Sprint(round)}); err != nil {
				t.Fatal(err)
			}
			res.Outcome["churn: updated"]++
		}
		resp, err := cli.Get(context.Background(), "/")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Compact(context.Background(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
			t.Fatal(err)
		}
		// The compaction is past the watcher's view only if the watcher has not
		// seen the churn: checked below; counted once etcd refuses the old revision.
		if _, err := cli.Get(context.Background(), "/", clientv3.WithRev(w.View().Revision+1)); errors.Is(err, rpctypes.ErrCompacted) {
			res.Faults["history compacted past the watcher"]++
		}
		if v := w.View(); v.Revision >= resp.Header.Revision {
			t.Fatalf("round %d: the watcher saw revision %d through the blackhole (compacted at %d)", round, v.Revision, resp.Header.Revision)
		}
		// Stay blackholed long enough for the watcher to presume its watch hung.
		time.Sleep(1500 * time.Millisecond)
		if w.Healthy() {
			t.Fatalf("round %d: watcher healthy while blackholed (staleness %v)", round, w.Staleness())
		}
		proxy.Heal()
		healed := time.Now()
		coordtest.Until(t, 30*time.Second, 5*time.Millisecond, fmt.Sprintf("round %d: view equals etcd's set", round), func() bool { return viewEqualsTruth(t, w, cli, tenant) })
		took := time.Since(healed)
		got := m.sum("coordkit.membership.relists") - relists
		t.Logf("round %d: converged %v after the heal, %d re-list(s); %d members", round, took.Round(time.Millisecond), got, len(w.View().Members))
		if got != 1 {
			t.Fatalf("round %d: %d re-lists for one compaction, want 1", round, got)
		}
		res.Trials++
		res.Outcome["re-lists"] += got
		res.Outcome["converged after heal max ms"] = max(res.Outcome["converged after heal max ms"], took.Milliseconds())
	}
	st := proxy.Stats()
	if st.Blackholes != rounds || st.DroppedBytes == 0 {
		t.Fatalf("blackhole not injected: %+v", st)
	}
	res.Outcome["bytes dropped"] = st.DroppedBytes
	res.Notes = fmt.Sprintf("%d instances on %d sessions; ProbeInterval 200 ms, ResetAfter 1 s; each round blackholes for the churn + 1.5 s", n, n/per)
}
