package ownership_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestShortBlackholeChangesNothing: a member's etcd connection is blackholed
// for well under its step-down deadline (1 s with TTL 6 s: step-down at 4 s
// after the last renewal). Nothing changes: no partition is revoked, the
// tokens stay, and the target is not rewritten (its watches restart and the
// recomputation finds the same target).
func TestShortBlackholeChangesNothing(t *testing.T) {
	res := coordtest.NewResult(t, "member's etcd connection blackholed for less than the step-down deadline: nothing revoked, nothing rewritten",
		coordtest.Faults("member connection blackholed"))
	defer coordtest.Report(t, res)
	const p, ttl = 4, 6 * time.Second
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	pcli := coordtest.NewEtcdClient(t, proxy.URL())
	cfg := ownership.Config{Tenant: tenant, Group: "orders", Partitions: p, Logger: coordtest.Logger(t)}
	g, err := ownership.New(pcli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := ownership.NewTestSession(t, pcli, tenant, ttl)
	m, err := g.Join(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the member holds every partition", func() bool { return len(m.Owned()) == p })
	before := m.Owned()
	target := "/tenants/" + tenant + "/ownership/orders/target"
	rev := func() int64 {
		resp, err := cli.Get(ctx, target)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("target: %v %v", resp, err)
		}
		return resp.Kvs[0].ModRevision
	}
	targetRev := rev()

	holes := proxy.Stats().Blackholes
	proxy.Blackhole()
	res.Faults["member connection blackholed"] += proxy.Stats().Blackholes - holes
	time.Sleep(time.Second)
	proxy.Heal()
	// Let the member's keepalive and watches come back, and any recomputation
	// happen: a renewal succeeds within TTL/3.
	time.Sleep(ttl / 2)
	if err := s.Err(); err != nil {
		t.Fatalf("the session lost its authority over a 1 s blackhole: %v", err)
	}
	after := m.Owned()
	if len(after) != p {
		t.Fatalf("holds %d partitions after the blackhole, want %d", len(after), p)
	}
	for i := range after {
		if after[i] != before[i] || !after[i].Valid() {
			t.Errorf("partition %d changed or invalid after a short blackhole", after[i].ID())
		}
	}
	if got := rev(); got != targetRev {
		t.Errorf("target rewritten (mod revision %d → %d) over a short blackhole", targetRev, got)
	}
	for len(m.Events()) > 0 { // nobody read them: every event since Join
		if ev := <-m.Events(); ev.Kind != ownership.Acquired {
			t.Errorf("%v partition %d (%s) over a short blackhole", ev.Kind, ev.Partition.ID(), ev.Reason)
		}
	}
	res.Trials++
	res.Outcome["dropped bytes"] = proxy.Stats().DroppedBytes
	res.Notes = "P=4, one member, TTL 6 s, blackholed 1 s"
}

// TestPartitionKeyDeleted: an operator deletes a held partition's key. The
// owner's context ends (Revoked, key_lost) and, the target still giving it the
// partition, it acquires it again with a newer token.
func TestPartitionKeyDeleted(t *testing.T) {
	const p = 2
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p})
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	old := a.m.Owned()[0]
	if _, err := cli.Delete(context.Background(), "/tenants/"+tenant+"/elections/"+ownership.LeaseName("orders", old.ID())+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the partition acquired again with a newer token", func() bool {
		now := a.m.Owned()
		return len(now) == p && now[0].ID() == old.ID() && now[0].Token().Revision() > old.Token().Revision()
	})
	if old.Context().Err() == nil || old.Valid() {
		t.Fatal("the old partition's context is live after its key was deleted")
	}
	if reasons := a.revokes(); len(reasons) != 1 || reasons[0] != ownership.ReasonKeyLost {
		t.Fatalf("revoke reasons %v, want [key_lost]", reasons)
	}
}

// TestTargetDeletedRevokesForNobody: the group's target key is deleted (an
// operator, a restore). With no target nothing is this member's: every held
// partition is revoked with a *RevokedError naming no new owner (To ""), the
// target is written again and the partitions acquired again. Reading the new
// owner out of a target that has no partitions must not crash the member.
func TestTargetDeletedRevokesForNobody(t *testing.T) {
	const p = 2
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p})
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

// TestEventsNeverBlock: nobody reads Events while the member's partition key
// is deleted again and again (each time a Revoked and an Acquired). The member
// keeps working: events beyond the buffer are dropped and counted, and Owned
// is current (the latest token).
func TestEventsNeverBlock(t *testing.T) {
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: 1})
	ctx := context.Background()
	s := newSession(t, cli, tenant)
	m, err := g.Join(ctx, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var last int64
	for i := range 12 { // 2 events each, 18 buffered (min(2P, 4096) + 16)
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "partition 0 held with a newer token", func() bool {
			o := m.Owned()
			return len(o) == 1 && o[0].Token().Revision() > last
		})
		last = m.Owned()[0].Token().Revision()
		if i < 11 {
			if _, err := cli.Delete(ctx, "/tenants/"+tenant+"/elections/"+ownership.LeaseName("orders", 0)+"/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.Dropped() == 0 {
		t.Fatalf("%d events buffered and none dropped: the buffer is not what the doc says", len(m.Events()))
	}
	if got := len(m.Events()); got != cap(m.Events()) {
		t.Fatalf("%d of %d buffered", got, cap(m.Events()))
	}
}
