package coordtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestGRPCProxyIsEtcdsProxy: GRPCProxy runs etcd's own grpc-proxy. Keys written
// through a namespaced proxy land under its namespace in etcd; twenty identical
// watches of five clients through the proxy cost etcd one watcher, as its own
// gauge says (twenty directly cost twenty); the proxy does not answer progress
// requests; and the proxy serves its own /metrics.
func TestGRPCProxyIsEtcdsProxy(t *testing.T) {
	cluster := EtcdCluster(t, 1, nil)
	ep := cluster.Endpoints()[0]
	proxy := GRPCProxy(t, cluster.Endpoints(), &GRPCProxyOpts{Namespace: "/ns1"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	direct := cluster.Client(t)
	via := proxy.Client(t)
	if _, err := via.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put through the proxy: %v", err)
	}
	got, err := direct.Get(ctx, "/ns1/k")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "v" {
		t.Fatalf("the proxy's /k is not etcd's /ns1/k: %v %v", got, err)
	}

	watchers := func() int {
		t.Helper()
		v, ok, err := EtcdMetric(ep, "etcd_debugging_mvcc_watcher_total")
		if err != nil || !ok {
			t.Fatalf("etcd's watcher gauge: found %v, %v", ok, err)
		}
		return int(v)
	}
	// settled waits until the gauge equals want (watches open asynchronously).
	settled := func(want int, what string) {
		t.Helper()
		Until(t, 20*time.Second, 20*time.Millisecond, fmt.Sprintf("etcd's watcher gauge at %d: %s", want, what), func() bool { return watchers() == want })
	}
	base := watchers()
	wctx, wcancel := context.WithCancel(ctx)
	var chans []clientv3.WatchChan
	for range 5 {
		c := NewEtcdClient(t, proxy.URL)
		for range 4 {
			chans = append(chans, c.Watch(wctx, "/cfg/", clientv3.WithPrefix(), clientv3.WithCreatedNotify()))
		}
	}
	for i, ch := range chans {
		if wr := Recv(t, ch, 20*time.Second, "a watch through the proxy created"); !wr.Created {
			t.Fatalf("watch %d: first response is not its creation: %+v", i, wr)
		}
	}
	settled(base+1, "20 identical watches of 5 clients through the proxy")
	if _, err := via.Put(ctx, "/cfg/a", "1"); err != nil {
		t.Fatal(err)
	}
	for i, ch := range chans {
		wr := Recv(t, ch, 20*time.Second, "the event through the proxy")
		if len(wr.Events) != 1 || string(wr.Events[0].Kv.Key) != "/cfg/a" {
			t.Fatalf("watch %d through the proxy got %+v, want the put of /cfg/a (namespace stripped)", i, wr)
		}
	}
	// The proxy's own metrics (its coalescing gauge counts only the watchers
	// that joined a broadcast after its first response: no count of upstream
	// watches; etcd's gauge is one); its /metrics relays etcd's.
	if v, ok, err := EtcdMetric(proxy.MetricsURL, "etcd_grpc_proxy_events_coalescing_total"); err != nil || !ok || v < 19 {
		t.Errorf("the proxy's events_coalescing_total: %v (found %v, %v), want ≥ 19 for one event to 20 watchers", v, ok, err)
	}
	if _, ok, err := EtcdMetric(proxy.URL, "etcd_debugging_mvcc_watcher_total"); err != nil || !ok {
		t.Errorf("the proxy's /metrics does not relay etcd's: found %v, %v", ok, err)
	}
	wcancel()
	settled(base, "the watches through the proxy cancelled")

	// Directly, each watch is a watcher of etcd's.
	dctx, dcancel := context.WithCancel(ctx)
	for range 20 {
		ch := direct.Watch(dctx, "/ns1/cfg/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		Recv(t, ch, 20*time.Second, "a direct watch created")
	}
	settled(base+20, "20 direct watches")
	dcancel()

	// A progress request through the proxy is never answered.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	ch := via.Watch(pctx, "/cfg/", clientv3.WithPrefix(), clientv3.WithCreatedNotify(), clientv3.WithProgressNotify())
	Recv(t, ch, 20*time.Second, "the watch created")
	if err := via.RequestProgress(pctx); err != nil {
		t.Fatalf("request progress: %v", err)
	}
	select {
	case wr := <-ch:
		if wr.IsProgressNotify() {
			t.Fatalf("the proxy answered a progress request (%+v): docs/deploy-grpc-proxy.md says it does not", wr)
		}
		t.Fatalf("unexpected response %+v", wr)
	case <-time.After(2 * time.Second):
	}
}
