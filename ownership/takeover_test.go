package ownership_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestBlackholedOwnerTakenOver: a member's etcd connection is blackholed (as
// for a paused or partitioned process). Its partitions' contexts are cancelled
// at step-down (2/3 TTL), before the other member acquires them after the
// session lease expires; the survivor then holds every partition, each with a
// newer token, and pgfence rejects the old owner's late write of every
// partition it lost while the survivor's writes go through.
func TestBlackholedOwnerTakenOver(t *testing.T) {
	res := coordtest.NewResult(t, "owner's etcd connection blackholed: its partitions revoked at step-down, taken over after the TTL, its late writes fenced",
		coordtest.Faults("member connection blackholed", "late write by the old owner"))
	defer coordtest.Report(t, res)
	const p = 4
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pgfence.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	tenant := coordtest.Tenant(t)
	cfg := ownership.Config{Tenant: tenant, Group: "orders", Partitions: p, Logger: coordtest.Logger(t)}
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	pcli := coordtest.NewEtcdClient(t, proxy.URL())
	ga, err := ownership.New(pcli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := ownership.New(cli, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := join(t, ga, pcli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	b := join(t, gb, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p / 2, b: p / 2})

	write := func(tok coord.Token) error {
		return pgfence.Exec(ctx, db.Pool, tok, func(context.Context, pgx.Tx) error { return nil })
	}
	lost := a.m.Owned()
	cancelledAt := map[int]time.Time{}
	stops := make(chan int, p)
	for _, part := range lost {
		if err := write(part.Token()); err != nil {
			t.Fatalf("owner's write of partition %d: %v", part.ID(), err)
		}
		id := part.ID()
		context.AfterFunc(part.Context(), func() { stops <- id })
	}

	a.mu.Lock()
	before := len(a.events)
	a.mu.Unlock()
	holes := proxy.Stats().Blackholes
	proxy.Blackhole()
	res.Faults["member connection blackholed"] += proxy.Stats().Blackholes - holes
	cut := time.Now()
	for range lost {
		id := coordtest.Recv(t, stops, 2*testTTL, "a blackholed owner's partition context cancelled")
		cancelledAt[id] = time.Now()
	}
	waitOwned(t, p, 3*testTTL, map[*node]int{b: p})
	took := time.Since(cut)
	t.Logf("all %d partitions owned by the survivor %v after the blackhole (TTL %v)", p, took.Round(time.Millisecond), testTTL)
	res.Outcome["takeover after blackhole ms"] = took.Milliseconds()

	b.mu.Lock()
	for _, part := range lost {
		if acq := b.acquiredAt[part.ID()]; !cancelledAt[part.ID()].Before(acq) {
			t.Errorf("partition %d: acquired by the survivor at %v, not after the old owner's context ended at %v", part.ID(), acq, cancelledAt[part.ID()])
		}
		var ae *coord.AuthorityLostError
		if cause := context.Cause(part.Context()); !errors.As(cause, &ae) || part.Valid() {
			t.Errorf("partition %d: cause %v, Valid %v; want a *coord.AuthorityLostError and not valid", part.ID(), cause, part.Valid())
		}
	}
	b.mu.Unlock()
	for _, part := range b.m.Owned() {
		if err := write(part.Token()); err != nil {
			t.Fatalf("survivor's write of partition %d: %v", part.ID(), err)
		}
	}
	for _, part := range lost {
		err := write(part.Token())
		res.Faults["late write by the old owner"]++
		var stale *coord.StaleTokenError
		if !errors.As(err, &stale) {
			t.Fatalf("old owner's late write of partition %d: %v, want a *coord.StaleTokenError", part.ID(), err)
		}
		res.Outcome["late writes rejected"]++
	}
	select {
	case <-a.m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the blackholed member did not stop after its session was lost")
	}
	a.mu.Lock()
	for _, ev := range a.events[before:] {
		if ev.Kind == ownership.Revoked && ev.Reason != ownership.ReasonSessionLost {
			t.Errorf("blackholed member's revoke reason %q, want session_lost", ev.Reason)
		}
	}
	a.mu.Unlock()
	proxy.Heal()
	res.Trials++
	res.Notes = "P=4, 2 members, TTL 3 s; one member's client (session and group) through a blackholed proxy"
}
