package ownership_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestSteadyStateWritesNothing: once a group of 3 members and P=12 has settled,
// etcd's revision does not move for 1.5 TTL (keepalives only: no target write,
// no partition key written), and every key of the group is attached to one of
// the three session leases — one lease, one keepalive stream, per member.
func TestSteadyStateWritesNothing(t *testing.T) {
	const p = 12
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p})
	var ns []*node
	want := map[*node]int{}
	for range 3 {
		n := join(t, g, cli, tenant, 0)
		ns = append(ns, n)
		want[n] = p / 3
	}
	waitOwned(t, p, 10*time.Second, want)
	ctx := context.Background()
	before, err := cli.Get(ctx, "/tenants/"+tenant+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(testTTL * 3 / 2)
	after, err := cli.Get(ctx, "/tenants/"+tenant+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if after.Header.Revision != before.Header.Revision {
		t.Fatalf("etcd revision moved from %d to %d in steady state", before.Header.Revision, after.Header.Revision)
	}
	leases := map[int64]int{}
	for _, kv := range after.Kvs {
		if string(kv.Key) == "/tenants/"+tenant+"/ownership/orders/target" {
			continue
		}
		if kv.Lease == 0 {
			t.Errorf("key %s attached to no lease", kv.Key)
		}
		leases[kv.Lease]++
	}
	if len(leases) != 3 {
		t.Fatalf("the group's keys use %d leases, want 3 (one per member): %v", len(leases), leases)
	}
	// Each member: its member key, its session key and its partitions.
	for _, n := range ns {
		if len(n.m.Owned()) != p/3 {
			t.Fatalf("member %s holds %d", n.m.ID(), len(n.m.Owned()))
		}
	}
}

// TestCloseHandsOverWithoutTTL: Close releases every partition at once (no
// drain, cause *coord.AuthorityLostError, reason closed): the other member
// holds them well before the closed member's TTL could have expired.
func TestCloseHandsOverWithoutTTL(t *testing.T) {
	const p = 6
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, DrainTimeout: time.Minute})
	a := join(t, g, cli, tenant, 0)
	b := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p / 2, b: p / 2})
	a.noAck.Store(true) // Close must not wait for Done (nor the minute of DrainTimeout)
	start := time.Now()
	if err := a.m.Close(); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, p, testTTL/2, map[*node]int{b: p})
	t.Logf("the survivor held every partition %v after Close", time.Since(start).Round(time.Millisecond))
	coordtest.Recv(t, a.doneCh(), 5*time.Second, "Events closed after Close")
	closed := 0
	for _, r := range a.revokes() {
		if r == ownership.ReasonClosed {
			closed++
		}
	}
	if closed != p/2 {
		t.Fatalf("%d Revoked(closed) events, want %d", closed, p/2)
	}
}
