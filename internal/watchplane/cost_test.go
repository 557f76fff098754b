package watchplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// watchers reads the spawned etcd member's own gauge of its watchers.
func watchers(t *testing.T, endpoint string) int {
	t.Helper()
	v, ok, err := coordtest.EtcdMetric(endpoint, "etcd_debugging_mvcc_watcher_total")
	if err != nil || !ok {
		t.Fatalf("etcd_debugging_mvcc_watcher_total of %s: found %v, %v", endpoint, ok, err)
	}
	return int(v)
}

// settled returns the gauge once it has held still for 300 ms (watches open
// and close asynchronously), within 20 s.
func settled(t *testing.T, endpoint string) int {
	t.Helper()
	last, since := watchers(t, endpoint), time.Now()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := watchers(t, endpoint); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) > 300*time.Millisecond {
			return n
		}
	}
	return last
}

// TestWatchCostPerProcess re-measures issue 28's table with the public API, as
// a user writes it (default configs, one client passed everywhere), against
// the server's own gauge etcd_debugging_mvcc_watcher_total of a spawned etcd.
// Before the watch plane the rows cost +200, +200, +10, +10 and +203 watchers;
// the plain-clientv3 control row shows the gauge counts every watch.
func TestWatchCostPerProcess(t *testing.T) {
	cluster := coordtest.EtcdCluster(t, 1, nil)
	ep := cluster.Endpoints()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	row := func(name string, max int, hold func(cli *clientv3.Client) func()) {
		t.Run(name, func(t *testing.T) {
			cli := coordtest.NewEtcdClient(t, ep)
			before := settled(t, ep)
			release := hold(cli)
			added := settled(t, ep) - before
			release()
			t.Logf("%s: +%d server watchers (at most +%d)", name, added, max)
			if added > max || added < 1 {
				t.Errorf("%s added %d server watchers, want 1..%d", name, added, max)
			}
		})
	}
	tenant := "cost"
	row("plain clientv3: 20 watches of 20 keys (control)", 20, func(cli *clientv3.Client) func() {
		wctx, wcancel := context.WithCancel(ctx)
		for i := range 20 {
			cli.Watch(wctx, fmt.Sprintf("/tenants/%s/config/k%d", tenant, i))
		}
		return wcancel
	})
	row("1 correctnesslease session holding 200 leases", 1, func(cli *clientv3.Client) func() {
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			if _, err := correctnesslease.Acquire(ctx, s, fmt.Sprintf("lease-%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		return func() { _ = s.Close(ctx) }
	})
	row("200 membership registrations", 1, func(cli *clientv3.Client) func() {
		var regs []*membership.Registration
		for i := range 200 {
			r, err := membership.Register(ctx, cli, membership.Config{Tenant: tenant, Service: "api", Instance: fmt.Sprintf("i%03d", i)})
			if err != nil {
				t.Fatal(err)
			}
			regs = append(regs, r)
		}
		return func() {
			for _, r := range regs {
				_ = r.Deregister(ctx)
			}
		}
	})
	row("10 membership.Watch of the same service", 1, func(cli *clientv3.Client) func() {
		var ws []*membership.Watcher
		for range 10 {
			w, err := membership.Watch(ctx, cli, tenant, "api", membership.WatchConfig{})
			if err != nil {
				t.Fatal(err)
			}
			<-w.Updates()
			ws = append(ws, w)
		}
		return func() {
			for _, w := range ws {
				w.Close()
			}
		}
	})
	row("10 failstatic caches of the same key", 1, func(cli *clientv3.Client) func() {
		var cs []*failstatic.Cache[string]
		for range 10 {
			c, err := failstatic.New(ctx, cli, failstatic.Config[string]{Key: "/tenants/" + tenant + "/config/flags",
				Decode: func(kvs []failstatic.KV) (string, error) { return fmt.Sprint(len(kvs)), nil }})
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		return func() {
			for _, c := range cs {
				_ = c.Close()
			}
		}
	})
	row("1 ownership member holding 200 partitions", 4, func(cli *clientv3.Client) func() {
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: tenant})
		if err != nil {
			t.Fatal(err)
		}
		g, err := ownership.New(cli, ownership.Config{Tenant: tenant, Group: "cost", Partitions: 200})
		if err != nil {
			t.Fatal(err)
		}
		m, err := g.Join(ctx, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		coordtest.Until(t, 60*time.Second, 50*time.Millisecond, "the member holding its 200 partitions", func() bool { return len(m.Owned()) == 200 })
		return func() {
			_ = m.Close()
			_ = s.Close(ctx)
		}
	})
}
