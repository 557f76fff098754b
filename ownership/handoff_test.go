package ownership_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestJoinAndLeaveHandoff: a second member joins a group of P=8 held by one;
// only the partitions the joiner takes move (at most ⌈P/N⌉+1), each one's
// context is cancelled (Revoked, cause *RevokedError) on the old owner before
// the new owner acquires it, with a newer token; the others are never revoked.
// Then the joiner leaves: everything goes back, by the same handoff.
func TestJoinAndLeaveHandoff(t *testing.T) {
	const p = 8
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, DrainTimeout: 2 * time.Second})
	a := join(t, g, cli, tenant, 20*time.Millisecond)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	tokens := map[int]int64{}
	for _, part := range a.m.Owned() {
		tokens[part.ID()] = part.Token().Revision()
		if !part.Valid() || part.Context().Err() != nil {
			t.Fatalf("partition %d held but not valid", part.ID())
		}
	}

	b := join(t, g, cli, tenant, 20*time.Millisecond)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p / 2, b: p / 2})
	moved := owned(b.m)
	if len(moved) > (p+1)/2+1 {
		t.Fatalf("%d partitions moved, more than ⌈P/N⌉+1", len(moved))
	}
	a.mu.Lock()
	b.mu.Lock()
	for _, id := range moved {
		rev, acq := a.revokedAt[id], b.acquiredAt[id]
		if rev.IsZero() || !a.cancelled[id] {
			t.Errorf("partition %d: moved to the joiner but the old owner's context was not cancelled at its Revoked event", id)
		} else if !rev.Before(acq) {
			t.Errorf("partition %d: new owner acquired at %v, before the old owner's revoke at %v", id, acq, rev)
		}
	}
	for id := range a.revokedAt {
		if !slices.Contains(moved, id) {
			t.Errorf("partition %d revoked on the member that kept it", id)
		}
	}
	revokes := 0
	for _, ev := range a.events {
		if ev.Kind == ownership.Revoked {
			revokes++
			if ev.Reason != ownership.ReasonRebalance {
				t.Errorf("revoke reason %q, want rebalance", ev.Reason)
			}
			// The cause names the member the target gives the partition to.
			var rev *ownership.RevokedError
			if cause := context.Cause(ev.Partition.Context()); !errors.As(cause, &rev) || rev.To != b.m.ID() {
				t.Errorf("partition %d revoked with cause %v, want a *RevokedError to %s", ev.Partition.ID(), cause, b.m.ID())
			}
		}
	}
	// No flapping: each moved partition moved once, and nothing came back.
	if revokes != len(moved) || len(b.events) != len(moved) {
		t.Errorf("%d revokes on the old owner and %d events on the joiner for %d moved partitions", revokes, len(b.events), len(moved))
	}
	b.mu.Unlock()
	a.mu.Unlock()
	for _, part := range b.m.Owned() {
		if part.Token().Revision() <= tokens[part.ID()] {
			t.Errorf("partition %d: new owner's token %v not newer than %d", part.ID(), part.Token(), tokens[part.ID()])
		}
		if part.Token().Lease() != "/tenants/"+tenant+"/elections/"+ownership.LeaseName("orders", part.ID()) {
			t.Errorf("token lease %q", part.Token().Lease())
		}
	}

	snap, err := ownership.GroupGet(context.Background(), cli, tenant, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Partitions != p || len(snap.Members) != 2 || snap.Unowned() != 0 {
		t.Fatalf("snapshot: %+v", snap)
	}
	for _, as := range snap.Owners {
		if as.Owner != as.Target {
			t.Errorf("partition %d: owner %s, target %s", as.Partition, as.Owner, as.Target)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.m.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	coordtest.Recv(t, b.doneCh(), 5*time.Second, "Events closed after Leave")
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.acquiredAt {
		if b.revokedAt[id].IsZero() {
			t.Errorf("partition %d: no Revoked event at Leave", id)
		}
	}
	if err := b.m.Leave(ctx); err == nil {
		t.Error("second Leave returned nil")
	}
}
