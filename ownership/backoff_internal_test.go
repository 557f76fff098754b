package ownership

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// ceilings records the backoff ceilings drawn through Config.backoffRand.
type ceilings struct {
	mu sync.Mutex
	cs []time.Duration
}

func (c *ceilings) rand(n int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cs = append(c.cs, time.Duration(n))
	return n / 2
}

func (c *ceilings) first(k int) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.cs[:min(k, len(c.cs))])
}

// joinAcking joins a member that acknowledges every revoke at once.
func joinAcking(t *testing.T, g *Group, s *correctnesslease.Session) *Member {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := g.Join(ctx, s, nil)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	go func() {
		for ev := range m.Events() {
			if ev.Kind == Revoked {
				ev.Partition.Done()
			}
		}
	}()
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// TestAcquireRetriesBackOffFromTheFirstCeiling: a member's acquisition of a
// partition held outside the group fails again and again (its queued key is
// deleted each time). The retries draw their delays under ceilings 50, 100,
// 200, 400 ms: the backoff starts at its base and grows with each failure of
// the same slot.
func TestAcquireRetriesBackOffFromTheFirstCeiling(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	var c ceilings
	g, err := New(cli, Config{Tenant: tenant, Group: "orders", Partitions: 1, Logger: coordtest.Logger(t), backoffRand: c.rand})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	holder, err := correctnesslease.Acquire(ctx, NewTestSession(t, cli, tenant, 3*time.Second), LeaseName("orders", 0))
	if err != nil {
		t.Fatalf("Acquire outside the group: %v", err)
	}
	prefix := "/tenants/" + tenant + "/elections/" + LeaseName("orders", 0) + "/"
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(holder.Token().Revision()+1))
	joinAcking(t, g, NewTestSession(t, cli, tenant, 3*time.Second))
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	for len(c.first(len(want))) < len(want) {
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			t.Fatalf("the watch of the partition's queue ended (%v) with the retries' ceilings %v, want %v", wr.Err(), c.first(len(want)), want)
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut && ev.Kv.CreateRevision != holder.Token().Revision() {
				if _, err := cli.Delete(ctx, string(ev.Kv.Key)); err != nil {
					t.Fatalf("delete of the member's queued key: %v", err)
				}
			}
		}
	}
	if got := c.first(len(want)); !slices.Equal(got, want) {
		t.Fatalf("failed acquisitions retried under ceilings %v, want %v", got, want)
	}
}

// TestReleaseRetriesAfterAThirdOfTheTTL: the tenant's write quota is spent (a
// fake clock: it never refills), so a revoked partition's release cannot write
// its delete. Each attempt gives up after a third of the session's TTL (1 s
// here) and the next waits a backoff drawn under 50, then 100 ms: two retries
// within 4 s, not one attempt blocked for longer, nor a backoff that does not
// grow from its base.
func TestReleaseRetriesAfterAThirdOfTheTTL(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	clk := coordtest.NewFakeClock(time.Now())
	q := coord.NewQuotas(coord.QuotaConfig{Clock: clk, Overrides: map[string]coord.Limits{tenant: {WritesPerSecond: 1, Burst: 100}}})
	var c ceilings
	g, err := New(cli, Config{Tenant: tenant, Group: "orders", Partitions: 1, Quotas: q, Logger: coordtest.Logger(t), backoffRand: c.rand})
	if err != nil {
		t.Fatal(err)
	}
	m := joinAcking(t, g, NewTestSession(t, cli, tenant, 3*time.Second))
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "the partition held", func() bool { return len(m.Owned()) == 1 })
	defer clk.Advance(time.Hour) // the quota refilled: the release and Close go through
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		_, err := q.WaitWrite(ctx, "/tenants/"+tenant+"/x", 1)
		cancel()
		if err != nil {
			break // spent
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, "/tenants/"+tenant+"/ownership/orders/target"); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}
	deadline := time.Now().Add(4 * time.Second)
	for len(c.first(2)) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.first(2); !slices.Equal(got, want) {
		t.Fatalf("after 4 s of a spent quota the release retried under ceilings %v, want %v (each attempt bounded by TTL/3)", got, want)
	}
}
