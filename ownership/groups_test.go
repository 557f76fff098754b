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
