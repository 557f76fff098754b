package reliability

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestGRPCProxyLaneMembershipWatcher: a registry watcher follows a service
// through the grpc-proxy over a link that is blackholed while instances leave,
// join and move. After the heal its view must be etcd's exact set, and it must
// be healthy with no error: confirmed current although the proxy answers no
// progress request (the plane compares key counts instead).
func TestGRPCProxyLaneMembershipWatcher(t *testing.T) {
	const fault = "watcher's link to the grpc-proxy blackholed"
	res := coordtest.NewResult(t, "grpc-proxy lane: membership watcher's link to the proxy blackholed while instances churn: exact, healthy and without error after",
		coordtest.Faults(fault))
	defer coordtest.Report(t, res)
	rig := newLaneRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := membership.NewSession(ctx, rig.via, membership.SessionConfig{TTL: 10 * time.Second, Logger: laneQuiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	regs := map[int]*membership.Registration{}
	register := func(i int, addr string) {
		r, err := s.Register(ctx, membership.Config{Tenant: "lane", Service: "api", Instance: fmt.Sprintf("i%02d", i), Addr: addr})
		if err != nil {
			t.Fatal(err)
		}
		regs[i] = r
	}
	for i := range 20 {
		register(i, fmt.Sprintf("10.0.0.%d:80", i))
	}
	wcli, link := rig.link(t)
	w, err := membership.Watch(ctx, wcli, "lane", "api", membership.WatchConfig{Logger: laneQuiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	exact := func() bool {
		want, err := membership.ServiceGet(ctx, rig.via, "lane", "api")
		if errors.Is(err, membership.ErrNotFound) { // nobody registered: an empty view
			want, err = membership.View{}, nil
		}
		if err != nil {
			return false
		}
		got := w.View()
		if len(got.Members) != len(want.Members) {
			return false
		}
		for _, m := range want.Members {
			if g, ok := got.Member(m.Instance); !ok || g.Addr != m.Addr {
				return false
			}
		}
		return true
	}
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the watcher's first view exact", exact)

	link.Blackhole()
	for i := range 5 { // five leave, five join, five move
		if err := regs[i].Deregister(ctx); err != nil {
			t.Fatal(err)
		}
		register(20+i, fmt.Sprintf("10.0.1.%d:80", i))
		if err := regs[10+i].Update(ctx, map[string]string{"zone": "b"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the watcher's bytes pile into the hole
	link.Heal()
	healed := time.Now()
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the watcher exact, healthy and without error after the heal", func() bool {
		return exact() && w.Healthy() && w.Err() == nil
	})
	if d := link.Stats().DroppedBytes; d > 0 {
		res.Faults[fault]++
		res.Outcome["bytes dropped"] = d
	}
	res.Trials = 1
	res.Outcome["exact and healthy after the heal ms"] = time.Since(healed).Milliseconds()
	if n := rig.inNamespace(t, "/tenants/lane/members/api/"); n != 20 {
		t.Errorf("etcd holds %d members under %s: want the 20 written through the namespaced proxy", n, laneNamespace)
	}
}

// TestGRPCProxyLaneFailstaticCache: a cache of a config prefix follows etcd
// through the grpc-proxy over a link that is blackholed while 100 updates and
// deletes land. After the heal the cache must equal etcd and be confirmed
// current again (Staleness under its probe interval's reach, though the proxy
// answers no progress request), and the changes its subscriber was given must
// replay, in order, to that state.
func TestGRPCProxyLaneFailstaticCache(t *testing.T) {
	const fault = "cache's link to the grpc-proxy blackholed"
	res := coordtest.NewResult(t, "grpc-proxy lane: failstatic cache's link to the proxy blackholed while updates land: equal to etcd and confirmed current after",
		coordtest.Faults(fault))
	defer coordtest.Report(t, res)
	rig := newLaneRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const prefix = "/tenants/lane/config/app/"
	for i := range 10 {
		if _, err := rig.via.Put(ctx, fmt.Sprintf("%sk%02d", prefix, i), "seed"); err != nil {
			t.Fatal(err)
		}
	}
	ccli, link := rig.link(t)
	c, err := failstatic.New(ctx, ccli, failstatic.Config[map[string]string]{Prefix: prefix, Logger: laneQuiet,
		Decode: func(kvs []failstatic.KV) (map[string]string, error) {
			m := make(map[string]string, len(kvs))
			for _, kv := range kvs {
				m[kv.Key] = string(kv.Value)
			}
			return m, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	replayed := maps.Clone(c.Get().Value)
	var outOfOrder int
	last := map[string]int64{}
	stop := c.Subscribe(func(_ failstatic.Snapshot[map[string]string], changes []failstatic.Change) {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range changes {
			if ch.ModRevision <= last[ch.Key] {
				outOfOrder++
			}
			last[ch.Key] = ch.ModRevision
			if ch.Deleted {
				delete(replayed, ch.Key)
			} else {
				replayed[ch.Key] = string(ch.Value)
			}
		}
	})
	defer stop()
	etcdState := func() map[string]string {
		resp, err := rig.via.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range resp.Kvs {
			m[string(kv.Key)] = string(kv.Value)
		}
		return m
	}

	link.Blackhole()
	for i := range 100 {
		k := fmt.Sprintf("%sk%02d", prefix, i%15)
		var err error
		if i%10 == 9 {
			_, err = rig.via.Delete(ctx, k)
		} else {
			_, err = rig.via.Put(ctx, k, fmt.Sprintf("u%d", i))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second)
	link.Heal()
	healed := time.Now()
	want := etcdState()
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the cache equal to etcd and confirmed current after the heal", func() bool {
		return maps.Equal(c.Get().Value, want) && c.Staleness() < 2*failstatic.DefaultProbeInterval
	})
	current := time.Since(healed)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the subscriber given every change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return maps.Equal(replayed, want)
	})
	mu.Lock()
	if outOfOrder > 0 {
		t.Errorf("%d changes given out of order", outOfOrder)
	}
	mu.Unlock()
	if d := link.Stats().DroppedBytes; d > 0 {
		res.Faults[fault]++
		res.Outcome["bytes dropped"] = d
	}
	res.Trials = 1
	res.Outcome["updates while blackholed"] = 100
	res.Outcome["equal and confirmed after the heal ms"] = current.Milliseconds()
	res.Outcome["re-lists"] = c.Status().Relists
	if n := rig.inNamespace(t, prefix); n != int64(len(want)) {
		t.Errorf("etcd holds %d keys under %s%s, want the %d written through the namespaced proxy", n, laneNamespace, prefix, len(want))
	}
}

// TestGRPCProxyLaneOwnershipTakeover: two ownership members share 6 partitions
// through the grpc-proxy, each over a link of its own. A's link is blackholed
// past its TTL: A steps down (every partition revoked), B takes A's partitions
// over with newer tokens; after the heal A joins again on a new session and the
// group re-forms, three partitions each.
func TestGRPCProxyLaneOwnershipTakeover(t *testing.T) {
	const fault = "member's link to the grpc-proxy blackholed past its TTL"
	res := coordtest.NewResult(t, "grpc-proxy lane: ownership member's link to the proxy blackholed past its TTL: its partitions taken over, the group re-forms after",
		coordtest.Faults(fault))
	defer coordtest.Report(t, res)
	rig := newLaneRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const p = 6
	lcfg := laneLeaseConfig
	join := func(cli *clientv3.Client) *ownership.Member {
		g, err := ownership.New(cli, ownership.Config{Tenant: "lane", Group: "orders", Partitions: p, Logger: laneQuiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Close)
		s, err := correctnesslease.NewSession(ctx, cli, lcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close(context.Background()) })
		m, err := g.Join(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ev := range m.Events() {
				if ev.Kind == ownership.Revoked {
					ev.Partition.Done()
				}
			}
		}()
		return m
	}
	acli, alink := rig.link(t)
	bcli, _ := rig.link(t)
	a, b := join(acli), join(bcli)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "A and B hold 3 partitions each", func() bool {
		return len(a.Owned()) == p/2 && len(b.Owned()) == p/2
	})
	lost := map[int]int64{}
	for _, part := range a.Owned() {
		lost[part.ID()] = part.Token().Revision()
	}

	alink.Blackhole()
	cut := time.Now()
	coordtest.Recv(t, a.Done(), 3*lcfg.TTL, "A stepping down while cut off")
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "B holding every partition, A's with newer tokens", func() bool {
		owned := b.Owned()
		if len(owned) != p {
			return false
		}
		for _, part := range owned {
			if old, ok := lost[part.ID()]; ok && part.Token().Revision() <= old {
				return false
			}
		}
		return true
	})
	takeover := time.Since(cut)
	if d := alink.Stats().DroppedBytes; d > 0 {
		res.Faults[fault]++
		res.Outcome["bytes dropped"] = d
	}
	alink.Heal()
	a2 := join(acli)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the group re-formed: A and B 3 partitions each", func() bool {
		return len(a2.Owned()) == p/2 && len(b.Owned()) == p/2
	})
	res.Trials = 1
	res.Outcome["A's partitions taken over after the cut ms"] = takeover.Milliseconds()
	if n := rig.inNamespace(t, "/tenants/lane/ownership/"); n == 0 {
		t.Errorf("no ownership key under %s in etcd: the lane did not run through the namespaced proxy", laneNamespace)
	}
}
