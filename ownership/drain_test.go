package ownership_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestDrainTimeout: an old owner that never calls Done keeps a revoked
// partition's key for DrainTimeout, then releases it anyway; the new owner
// acquires no earlier (checked against half the timeout: the revoke's time is
// taken when the test reads the event, which may be late; without the drain
// the new owner would acquire within milliseconds).
func TestDrainTimeout(t *testing.T) {
	const p, drain = 2, time.Second
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, DrainTimeout: drain})
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	a.noAck.Store(true)
	b := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: 1, b: 1})
	id := b.m.Owned()[0].ID()
	a.mu.Lock()
	b.mu.Lock()
	defer b.mu.Unlock()
	defer a.mu.Unlock()
	if waited := b.acquiredAt[id].Sub(a.revokedAt[id]); waited < drain/2 {
		t.Fatalf("partition %d acquired %v after its revoke, before the %v drain timeout", id, waited, drain)
	}
}

// TestLeaveDeadline: Leave whose context ends while a partition drains (its
// owner never calls Done, DrainTimeout a minute) releases the rest at once, as
// Close, and returns the context's error; the other member takes over.
func TestLeaveDeadline(t *testing.T) {
	const p = 2
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, DrainTimeout: time.Minute})
	a := join(t, g, cli, tenant, 0)
	b := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: 1, b: 1})
	b.noAck.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := b.m.Leave(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Leave past its deadline: %v, want context.DeadlineExceeded", err)
	}
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p}) // well before the minute of DrainTimeout
	coordtest.Recv(t, b.doneCh(), 5*time.Second, "Events closed after a Leave past its deadline")
	rev := b.revokes()
	if len(rev) != 1 || rev[0] != ownership.ReasonLeave {
		t.Fatalf("revokes %v, want one leave", rev)
	}
}

// TestRevokedPartitionIsNotValidWhileDraining: a revoked partition whose owner
// has not called Done keeps its key (and its lease is still valid: the owner
// still blocks the next one) — but Valid is false from the revoke on, so the
// draining owner no longer serves reads as the owner. (Valid ignoring the
// partition's own context passed every other test.)
func TestRevokedPartitionIsNotValidWhileDraining(t *testing.T) {
	const p = 2
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, DrainTimeout: time.Minute})
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	a.noAck.Store(true)
	b := join(t, g, cli, tenant, 0)
	var revoked *ownership.Partition
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "a partition revoked on a when b joins", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, ev := range a.events {
			if ev.Kind == ownership.Revoked {
				revoked = ev.Partition
				return true
			}
		}
		return false
	})
	for _, q := range b.m.Owned() {
		if q.ID() == revoked.ID() {
			t.Fatalf("partition %d already acquired by b: a is not draining it", q.ID())
		}
	}
	if keys(t, cli, revoked.Token().Lease()+"/") == 0 {
		t.Fatalf("partition %d's key is gone: a is not draining it", revoked.ID())
	}
	if revoked.Valid() {
		t.Fatalf("partition %d reports Valid while revoked and draining", revoked.ID())
	}
}
