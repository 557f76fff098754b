package membership_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestEtcdOutage stops etcd (killed and restarted on its data, or frozen with
// SIGSTOP) while a fleet of instances is registered, each with its own lease
// and etcd client, and watchers follow the service. After etcd returns, every
// instance must be registered again within TTL + 5 s, and every watcher's view
// must equal etcd's exact set within 1 s of the last re-registration.
//
// Outages are measured in TTLs: the bounded tier uses a 2 s TTL (outages of
// 1 s and 4 s), COORD_FULL=1 a 15 s TTL (7.5 s, 30 s and 5 min). "Less than a
// TTL" is TTL/2, so that most instances' keepalives (every TTL/3) meet the
// outage. The fault is counted by what observed it — the instances whose own
// metrics show a failed keepalive — and the test fails only if none did: on a
// loaded machine a keepalive can fall just outside a short outage, and an
// instance that never noticed it has nothing to recover from (it must still be
// registered and in every view at the end).
//
// The watchers presume a silent watch hung after TTL/2, so the longer outages
// make them fail and resume; once etcd is back and the view is exact, their
// Err must be nil again (it kept the old error before the watch plane:
// "opening watch …: context deadline exceeded" for as long as the test ran).
func TestEtcdOutage(t *testing.T) {
	ttl := coordtest.Pick(2*time.Second, 15*time.Second)
	n := coordtest.Pick(30, 100)
	cluster := coordtest.EtcdCluster(t, 1, nil)
	lengths := map[string]time.Duration{"less than a TTL": ttl / 2, "2 TTLs": 2 * ttl, "20 TTLs": 20 * ttl}
	for _, outage := range []string{
		"killed for less than a TTL", "frozen for less than a TTL",
		"killed for 2 TTLs", "frozen for 2 TTLs",
		"killed for 20 TTLs", "frozen for 20 TTLs",
	} {
		freeze, length := strings.HasPrefix(outage, "frozen"), lengths[outage[len("killed for "):]]
		if length >= 20*ttl && !coordtest.Full() {
			continue // 40 s of outage: full tier only
		}
		t.Run(outage, func(t *testing.T) {
			fault := "etcd killed and restarted"
			if freeze {
				fault = "etcd frozen (SIGSTOP)"
			}
			res := coordtest.NewResult(t, "etcd outage, every instance re-registered and every watcher exact after it: "+outage,
				coordtest.Faults(fault, "instances that observed the outage"))
			defer coordtest.Report(t, res)
			runOutage(t, res, cluster, freeze, length, fault, ttl, n)
		})
	}
}

// sampler records, every 10 ms, which registrations are registered, and when
// each last became registered after being down.
type sampler struct {
	mu     sync.Mutex
	up     []bool
	lastUp []time.Time // last down→up transition
	downs  []int
	stop   chan struct{}
	done   chan struct{}
}

func startSampler(regs []*membership.Registration) *sampler {
	s := &sampler{up: make([]bool, len(regs)), lastUp: make([]time.Time, len(regs)), downs: make([]int, len(regs)),
		stop: make(chan struct{}), done: make(chan struct{})}
	for i := range s.up {
		s.up[i] = true
	}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			now := time.Now()
			s.mu.Lock()
			for i, r := range regs {
				up := r.Registered()
				if up && !s.up[i] {
					s.lastUp[i] = now
				}
				if !up && s.up[i] {
					s.downs[i]++
				}
				s.up[i] = up
			}
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *sampler) allUp() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !slices.Contains(s.up, false)
}

func (s *sampler) close() { close(s.stop); <-s.done }

func runOutage(t *testing.T, res *coordtest.Result, cluster *coordtest.EtcdClusterServer, freeze bool, length time.Duration, fault string, ttl time.Duration, n int) {
	eps := cluster.Endpoints()
	tenant := coordtest.Tenant(t)
	truthCli := coordtest.NewEtcdClient(t, eps...)

	regs := make([]*membership.Registration, n)
	ms := make([]*metrics, n)
	clis := make([]*clientv3.Client, n)
	logs := make([]*coordtest.Buffer, n)
	for i := range regs {
		ms[i] = newMetrics(t)
		clis[i] = coordtest.NewEtcdClient(t, eps...)
		logs[i] = &coordtest.Buffer{}
		regs[i] = register(t, clis[i], membership.Config{
			Tenant: tenant, Service: "api", Instance: fmt.Sprintf("i%03d", i), Addr: fmt.Sprintf("10.0.%d.%d:80", i/250, i%250),
			SessionConfig: membership.SessionConfig{TTL: ttl, Logger: bufferLogger(logs[i]), MeterProvider: ms[i]},
		})
	}
	defer func() {
		if t.Failed() {
			for i, r := range regs {
				if !r.Registered() {
					t.Logf("%s (connection %v) log:\n%s", r.Key(), clis[i].ActiveConnection().GetState(), logs[i].String())
				}
			}
		}
	}()
	watchers := make([]*membership.Watcher, 3)
	for i := range watchers {
		watchers[i] = watch(t, coordtest.NewEtcdClient(t, eps...), tenant, "api", &membership.WatchConfig{Logger: quiet, ResetAfter: ttl / 2})
	}
	for i, w := range watchers {
		coordtest.Until(t, 20*time.Second, 5*time.Millisecond, fmt.Sprintf("watcher %d equals the truth before the fault", i), func() bool { return viewEqualsTruth(t, w, truthCli, tenant) })
	}
	oldLeases := map[clientv3.LeaseID]bool{}
	for _, r := range regs {
		oldLeases[r.Status().Lease] = true
	}

	recs := make([]*viewRecorder, len(watchers))
	for i, w := range watchers {
		recs[i] = recordViews(w)
	}
	m := cluster.Members[0]
	before := m.Stats()
	samp := startSampler(regs)
	stopped := time.Now()
	if freeze {
		if err := m.Pause(); err != nil {
			t.Fatal(err)
		}
	} else {
		m.Kill()
	}
	time.Sleep(length)
	if freeze {
		if err := m.Resume(); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		m.WaitOutput(t, "ready", 60*time.Second)
	}
	back := time.Now()
	// A fresh client for the truth: the old one's gRPC connection may still be
	// in gRPC's own connect backoff (what membership's clients avoid).
	truthCli = coordtest.NewEtcdClient(t, eps...)
	after := m.Stats()
	res.Faults[fault] = after.Pauses - before.Pauses + after.Kills - before.Kills
	if res.Faults[fault] != 1 {
		t.Fatalf("fault not injected: %+v → %+v", before, after)
	}
	t.Logf("%s for %v: back %v after the stop", fault, length, back.Sub(stopped).Round(time.Millisecond))

	// Settled: not before a TTL after etcd's return (keepalives may go on failing
	// a moment after it — a connection in gRPC's backoff, a member electing
	// itself — so an instance can still reach "unconfirmed for a TTL" and
	// unregister until then; and an instance that noticed the outage late is
	// re-registering by then), every instance registered, and etcd holding
	// exactly their keys.
	deadline := back.Add(ttl + 30*time.Second)
	for time.Now().Before(back.Add(ttl)) || !samp.allUp() || !truthMatches(t, truthCli, tenant, regs) {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	samp.close()

	// Each instance observed the outage (a failed keepalive, counted by its own
	// metrics), and how long after etcd's return it was registered again.
	var recov []time.Duration
	observed, lost, newLease, neverDown := 0, 0, 0, 0
	hist := map[string]int64{}
	buckets := []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second}
	var lastUp time.Time
	for i, r := range regs {
		if ms[i].sum("coordkit.membership.keepalives", attribute.String(coord.AttrOutcome, "error")) > 0 {
			observed++
		}
		st := r.Status()
		if st.Losses > 0 {
			lost++
		}
		if !oldLeases[st.Lease] {
			newLease++
		}
		if !samp.up[i] {
			t.Errorf("%s not registered %v after etcd's return: %+v", r.Key(), ttl+30*time.Second, st)
			continue
		}
		if samp.downs[i] == 0 {
			neverDown++
			hist["never unregistered"]++
			continue
		}
		d := max(0, samp.lastUp[i].Sub(back))
		lastUp = maxTime(lastUp, samp.lastUp[i])
		recov = append(recov, d)
		label := fmt.Sprintf("> %v", buckets[len(buckets)-1])
		for _, b := range buckets {
			if d <= b {
				label = fmt.Sprintf("≤ %v", b)
				break
			}
		}
		hist[label]++
	}
	slices.Sort(recov)
	res.Trials = n
	res.Faults["instances that observed the outage"] = observed
	res.Outcome["instances re-registered or renewed"] = int64(n - neverDown)
	res.Outcome["instances never unregistered"] = int64(neverDown)
	res.Outcome["instances that lost their key"] = int64(lost)
	res.Outcome["instances under a new lease"] = int64(newLease)
	for k, v := range hist {
		res.Outcome["recovered "+k] = v
	}
	if len(recov) > 0 {
		res.Outcome["recovery p10 ms"] = recov[len(recov)/10].Milliseconds()
		res.Outcome["recovery p50 ms"] = recov[len(recov)/2].Milliseconds()
		res.Outcome["recovery p90 ms"] = recov[len(recov)*9/10].Milliseconds()
		res.Outcome["recovery max ms"] = recov[len(recov)-1].Milliseconds()
	}
	t.Logf("%d instances: %d observed the outage, %d lost their key, %d under a new lease, %d never unregistered; recovery after etcd's return (histogram): %v; sorted: %v",
		n, observed, lost, newLease, neverDown, hist, roundAll(recov))
	if observed == 0 {
		t.Errorf("no instance observed the outage (a failed keepalive): the fault proved nothing")
	}
	if len(recov) > 0 && recov[len(recov)-1] > ttl+5*time.Second {
		t.Errorf("slowest instance registered again %v after etcd's return, want ≤ TTL + 5 s = %v", recov[len(recov)-1], ttl+5*time.Second)
	}
	if !truthMatches(t, truthCli, tenant, regs) {
		t.Fatal("etcd's keys do not match the registrations")
	}

	// Watchers: equal to etcd's exact set within 1 s of the last re-registration
	// (the receive time of the first view equal to the final truth; a view
	// equal to it is the final one, revisions only grow).
	settled := maxTime(back, lastUp)
	final, _ := instances(t, truthCli, tenant, "api")
	var worst time.Duration
	for i, w := range watchers {
		coordtest.Until(t, 20*time.Second, 5*time.Millisecond, fmt.Sprintf("watcher %d equals the truth", i), func() bool { return viewEqualsTruth(t, w, truthCli, tenant) })
		at, ok := recs[i].firstEqual(final)
		if !ok {
			at = stopped // no view after the fault: the view never differed
		}
		worst = max(worst, at.Sub(settled))
		coordtest.Until(t, 5*time.Second, 5*time.Millisecond, fmt.Sprintf("watcher %d's Err cleared once its view is exact again (Err: %v)", i, w.Err()), func() bool { return w.Err() == nil && w.Healthy() })
	}
	for _, r := range recs {
		r.close()
	}
	res.Outcome["watchers"] = int64(len(watchers))
	res.Outcome["watcher convergence after the last re-registration ms"] = worst.Milliseconds()
	res.Notes = fmt.Sprintf("TTL %v, outage %v, %d instances each with its own lease and client, 3 watchers; recovery = registered again after etcd's return", ttl, length, n)
	if worst > time.Second {
		t.Errorf("a watcher equalled the truth %v after the last re-registration, want ≤ 1 s", worst)
	}
}

// truthMatches reports whether etcd holds exactly the registrations' keys, each
// under the lease its registration reports, and every such lease is alive.
func truthMatches(t testing.TB, cli *clientv3.Client, tenant string, regs []*membership.Registration) bool {
	got, _ := instances(t, cli, tenant, "api")
	if len(got) != len(regs) {
		return false
	}
	leases := map[clientv3.LeaseID]bool{}
	for _, r := range regs {
		st := r.Status()
		key := r.Key()
		if got[key[len(key)-len("i000"):]] != st.Lease || st.Lease == 0 {
			return false
		}
		leases[st.Lease] = true
	}
	for id := range leases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ttl, err := cli.TimeToLive(ctx, id)
		cancel()
		if err != nil || ttl.TTL <= 0 {
			return false
		}
	}
	return true
}

// viewEqualsTruth reports whether the watcher's view is etcd's set right now:
// the same instances, leases and mod revisions.
func viewEqualsTruth(t testing.TB, w *membership.Watcher, cli *clientv3.Client, tenant string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	prefix := "/tenants/" + tenant + "/members/api/"
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return false
	}
	v := w.View()
	if len(v.Members) != len(resp.Kvs) || v.Revision == 0 {
		return false
	}
	for _, kv := range resp.Kvs {
		m, ok := v.Member(string(kv.Key[len(prefix):]))
		if !ok || m.ModRevision != kv.ModRevision || int64(m.Lease) != kv.Lease {
			return false
		}
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(10 * time.Millisecond)
	}
	return out
}

// viewRecorder keeps every view a watcher delivers, with its receive time.
type viewRecorder struct {
	mu    sync.Mutex
	at    []time.Time
	views []membership.View
	stop  chan struct{}
	done  chan struct{}
}

func recordViews(w *membership.Watcher) *viewRecorder {
	r := &viewRecorder{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case v, ok := <-w.Updates():
				if !ok {
					return
				}
				r.mu.Lock()
				r.at, r.views = append(r.at, time.Now()), append(r.views, v)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *viewRecorder) close() { close(r.stop); <-r.done }

// firstEqual returns the receive time of the first view whose instances and
// leases are exactly want.
func (r *viewRecorder) firstEqual(want map[string]clientv3.LeaseID) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, v := range r.views {
		if len(v.Members) != len(want) {
			continue
		}
		eq := true
		for _, m := range v.Members {
			if l, ok := want[m.Instance]; !ok || l != m.Lease {
				eq = false
				break
			}
		}
		if eq {
			return r.at[i], true
		}
	}
	return time.Time{}, false
}
