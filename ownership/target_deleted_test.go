package ownership_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestTargetDeletedRevokesForNobody: the group's target key is deleted (an
// operator, a restore). With no target nothing is this member's: every held
// partition is revoked with a *RevokedError naming no new owner (To ""), the
// target is written again and the partitions acquired again. Reading the new
// owner out of a target that has no partitions must not crash the member.
func TestTargetDeletedRevokesForNobody(t *testing.T) {
	const p = 2
	cli := coordtest.Etcd(t).Client(t)
	tenant := coordtest.Tenant(t)
	g, err := ownership.New(cli, ownership.Config{Tenant: tenant, Group: "orders", Partitions: p, Logger: coordtest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	old := a.m.Owned()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, "/tenants/"+tenant+"/ownership/orders/target"); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "both partitions held again with newer tokens", func() bool {
		now := a.m.Owned()
		return len(now) == p && now[0].Token().Revision() > old[0].Token().Revision() && now[1].Token().Revision() > old[1].Token().Revision()
	})
	for _, q := range old {
		var rev *ownership.RevokedError
		if cause := context.Cause(q.Context()); !errors.As(cause, &rev) || rev.To != "" || rev.Partition != q.ID() {
			t.Fatalf("partition %d revoked with cause %v, want a *RevokedError for no new owner", q.ID(), cause)
		}
	}
}
