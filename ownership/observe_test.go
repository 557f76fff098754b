package ownership_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestObserve: an observer gets the current map first, then a map after the
// changes: a second member joining shows as a second member owning its share,
// owner equal to target, and the channel closes when the observer's context
// ends.
func TestObserve(t *testing.T) {
	const p = 4
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p})
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
	coordtest.Recv(t, closed, 5*time.Second, "Observe's channel closed after its context ended")
}

// TestGroups lists the groups that have a target, per tenant and over every
// tenant, sorted by name ("orders" before "orders-eu", though '-' sorts before
// '/' in etcd's key order), a group whose last member has gone included and
// keys that are not a target ignored.
func TestGroups(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, g := range []ownership.GroupRef{{Tenant: "acme", Group: "orders-eu"}, {Tenant: "acme", Group: "orders"}, {Tenant: "acme-b", Group: "x"}} {
		grp, err := ownership.New(cli, ownership.Config{Tenant: g.Tenant, Group: g.Group, Partitions: 2, Logger: coordtest.Logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		n := join(t, grp, cli, g.Tenant, 0)
		waitOwned(t, 2, 10*time.Second, map[*node]int{n: 2})
		if g.Group == "orders-eu" {
			if err := n.m.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := cli.Put(ctx, "/tenants/acme/ownership/orders/not-a-target", "x"); err != nil {
		t.Fatal(err)
	}

	got, err := ownership.GroupList(ctx, cli, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if want := []ownership.GroupRef{{Tenant: "acme", Group: "orders"}, {Tenant: "acme", Group: "orders-eu"}}; !slices.Equal(got, want) {
		t.Fatalf("Groups(acme) = %v, want %v", got, want)
	}
	if got, err = ownership.GroupList(ctx, cli, ""); err != nil || len(got) != 3 || got[2] != (ownership.GroupRef{Tenant: "acme-b", Group: "x"}) {
		t.Fatalf("Groups(\"\") = %v, %v", got, err)
	}
	if got, err = ownership.GroupList(ctx, cli, "nobody"); err != nil || len(got) != 0 {
		t.Fatalf("Groups of a tenant without groups = %v, %v", got, err)
	}
	m, err := ownership.GroupGet(ctx, cli, "acme", "orders-eu")
	if err != nil || m.Partitions != 2 || m.Unowned() != 2 {
		t.Fatalf("the listed group whose member closed: %+v, %v", m, err)
	}
	if m, err := ownership.GroupGet(ctx, cli, "acme", "never-joined"); !errors.Is(err, ownership.ErrNotFound) {
		t.Fatalf("GroupGet of a group nobody joined = %+v, %v; want ErrNotFound", m, err)
	}

	if _, err := ownership.GroupList(ctx, cli, "a/b"); !errors.Is(err, ownership.ErrInvalidConfig) || !errors.Is(err, coord.ErrInvalidName) {
		t.Errorf("Groups with an invalid tenant: %v", err)
	}
	if _, err := ownership.GroupList(ctx, nil, "acme"); !errors.Is(err, ownership.ErrInvalidConfig) {
		t.Errorf("Groups with a nil client: %v", err)
	}
}
