package ownership_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestObserve: an observer gets the current map first, then a map after the
// changes: a second member joining shows as a second member owning its share,
// owner equal to target, and the channel closes when the observer's context
// ends.
func TestObserve(t *testing.T) {
	const p = 4
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	g, err := ownership.New(cli, ownership.Config{Tenant: tenant, Group: "orders", Partitions: p, Logger: coordtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := ownership.Observe(ctx, cli, tenant, "orders")
	if err != nil {
		t.Fatal(err)
	}
	first := coordtest.Recv(t, ch, 5*time.Second, "the first map")
	if first.Partitions != p || len(first.Members) != 1 || first.Unowned() != 0 || first.Members[0].Metadata["test"] != t.Name() {
		t.Fatalf("first map: %+v", first)
	}
	for _, as := range first.Owners {
		if as.Owner != a.m.ID() || as.Revision == 0 {
			t.Fatalf("first map, partition %d: %+v", as.Partition, as)
		}
	}
	b := join(t, g, cli, tenant, 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := coordtest.Recv(t, ch, 10*time.Second, "a map after the join")
		byB := 0
		for _, as := range m.Owners {
			if as.Owner == b.m.ID() && as.Target == b.m.ID() {
				byB++
			}
		}
		if len(m.Members) == 2 && byB == p/2 && m.Unowned() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no map with the joiner owning %d partitions: last %+v", p/2, m)
		}
	}
	cancel()
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Observe's channel not closed 5 s after its context ended")
	}
}
