package ownership_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

const testTTL = 3 * time.Second

// newSession opens a correctnesslease session of testTTL closed when the test
// ends.
func newSession(t testing.TB, cli *clientv3.Client, tenant string) *correctnesslease.Session {
	t.Helper()
	return ownership.NewTestSession(t, cli, tenant, testTTL)
}

// newGroup creates the group "orders" of the test's own tenant on the test
// etcd, with cfg's other fields and a logger into the test.
func newGroup(t testing.TB, cfg ownership.Config) (*ownership.Group, *clientv3.Client, string) {
	t.Helper()
	cli := coordtest.Etcd(t).Client(t)
	cfg.Tenant, cfg.Group, cfg.Logger = coordtest.Tenant(t), "orders", coordtest.Logger(t)
	g, err := ownership.New(cli, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return g, cli, cfg.Tenant
}

// node is one member under test, with the log of its events.
type node struct {
	m  *ownership.Member
	mu sync.Mutex
	// log of events in order; revokedAt/acquiredAt by partition (last).
	events     []ownership.Event
	acquiredAt map[int]time.Time
	revokedAt  map[int]time.Time // when the Revoked event was read (ctx already cancelled)
	cancelled  map[int]bool      // the context was cancelled when Revoked arrived
	done       chan struct{}
	noAck      atomic.Bool // stop acknowledging revokes
}

// join joins a member on a fresh session; its events are consumed (planned
// revokes acknowledged with Done after drain) until the channel closes.
func join(t testing.TB, g *ownership.Group, cli *clientv3.Client, tenant string, drain time.Duration) *node {
	t.Helper()
	s := newSession(t, cli, tenant)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := g.Join(ctx, s, map[string]string{"test": t.Name()})
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	n := &node{m: m, acquiredAt: map[int]time.Time{}, revokedAt: map[int]time.Time{}, cancelled: map[int]bool{}, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		for ev := range m.Events() {
			n.mu.Lock()
			n.events = append(n.events, ev)
			switch ev.Kind {
			case ownership.Acquired:
				n.acquiredAt[ev.Partition.ID()] = time.Now()
			case ownership.Revoked:
				n.revokedAt[ev.Partition.ID()] = time.Now()
				n.cancelled[ev.Partition.ID()] = ev.Partition.Context().Err() != nil
			}
			n.mu.Unlock()
			if ev.Kind == ownership.Revoked && !n.noAck.Load() {
				p := ev.Partition
				time.AfterFunc(drain, p.Done)
			}
		}
	}()
	t.Cleanup(func() {
		_ = m.Close()
		<-n.done
	})
	return n
}

// revokes returns the reasons of n's Revoked events, in order.
func (n *node) revokes() []ownership.Reason {
	n.mu.Lock()
	defer n.mu.Unlock()
	var rs []ownership.Reason
	for _, ev := range n.events {
		if ev.Kind == ownership.Revoked {
			rs = append(rs, ev.Reason)
		}
	}
	return rs
}

// owned returns the IDs of the partitions m holds.
func owned(m *ownership.Member) []int {
	var ids []int
	for _, p := range m.Owned() {
		ids = append(ids, p.ID())
	}
	return ids
}

// waitOwned waits until the members hold the given number of partitions each
// and together hold every partition of P exactly once.
func waitOwned(t testing.TB, p int, d time.Duration, want map[*node]int) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var all []int
		ok := true
		var got []string
		for n, w := range want {
			ids := owned(n.m)
			got = append(got, fmt.Sprintf("%s:%d", n.m.ID(), len(ids)))
			if len(ids) != w {
				ok = false
			}
			all = append(all, ids...)
		}
		slices.Sort(all)
		if ok && len(slices.Compact(all)) == p {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the members hold %v, want %v of %d partitions each once", d, got, want, p)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// keys counts the keys under prefix.
func keys(t testing.TB, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// doneCh is n.done as a channel of values, for coordtest.Recv.
func (n *node) doneCh() <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() { <-n.done; ch <- struct{}{} }()
	return ch
}

// reader is a manual OpenTelemetry metric reader with its meter provider.
type reader struct {
	mp *sdkmetric.MeterProvider
	r  *sdkmetric.ManualReader
}

func newReader(t testing.TB) reader {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader{mp: mp, r: r}
}
