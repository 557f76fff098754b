package ownership_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
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
	coordtest.Recv(t, a.m.Done(), 5*time.Second, "the blackholed member stopping after its session was lost")
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

// TestOutageLongerThanStepDown: every member's etcd connection is blackholed
// for 2 TTLs. Every member steps down (each partition revoked, session_lost,
// its context cancelled) and stops; once etcd is reachable again each process
// opens a new session and joins again (the loop of docs/ownership.md), and the
// group re-forms: every partition held once, with a newer token, each acquired
// once (no herd of retries), in a few target writes.
func TestOutageLongerThanStepDown(t *testing.T) {
	res := coordtest.NewResult(t, "every member's etcd connection blackholed for 2 TTLs: all step down, the group re-forms after",
		coordtest.Faults("members' connection blackholed", "members that stepped down"))
	defer coordtest.Report(t, res)
	const p, ttl = 6, 2 * time.Second
	e := coordtest.Etcd(t)
	tenant := coordtest.Tenant(t)
	proxy := coordtest.NewProxy(t, strings.TrimPrefix(e.Endpoints[0], "http://"))
	reader := newReader(t)
	pcli := coordtest.NewEtcdClient(t, proxy.URL())
	g, err := ownership.New(pcli, ownership.Config{Tenant: tenant, Group: "orders", Partitions: p, Logger: coordtest.Logger(t), MeterProvider: reader.mp})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type process struct{ members chan *ownership.Member }
	var wg sync.WaitGroup
	run := func() *process {
		pr := &process{members: make(chan *ownership.Member, 4)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; ctx.Err() == nil; attempt++ {
				s, err := correctnesslease.NewSession(ctx, pcli, correctnesslease.Config{Tenant: tenant, TTL: ttl, Logger: coordtest.Logger(t)})
				if err == nil {
					m, err := g.Join(ctx, s, nil)
					if err == nil {
						attempt = 0
						pr.members <- m
						for ev := range m.Events() {
							if ev.Kind == ownership.Revoked {
								ev.Partition.Done()
							}
						}
					}
					cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
					_ = s.Close(cctx)
					ccancel()
				}
				_ = (coord.Backoff{Base: 50 * time.Millisecond, Cap: time.Second}).Wait(ctx, coord.SystemClock(), attempt)
			}
		}()
		return pr
	}
	pa, pb := run(), run()
	a := coordtest.Recv(t, pa.members, 10*time.Second, "process A joined")
	b := coordtest.Recv(t, pb.members, 10*time.Second, "process B joined")
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "A and B hold 3 partitions each", func() bool {
		return len(a.Owned()) == p/2 && len(b.Owned()) == p/2
	})
	old := map[int]int64{}
	var held []*ownership.Partition
	for _, m := range []*ownership.Member{a, b} {
		for _, part := range m.Owned() {
			old[part.ID()] = part.Token().Revision()
			held = append(held, part)
		}
	}
	writes := collect(t, reader.r, "coordkit.ownership.target_writes")

	holes := proxy.Stats().Blackholes
	proxy.Blackhole()
	res.Faults["members' connection blackholed"] += proxy.Stats().Blackholes - holes
	for _, m := range []*ownership.Member{a, b} {
		coordtest.Recv(t, m.Done(), 2*ttl, "member "+m.ID()+" stepping down within 2 TTLs of the outage")
		res.Faults["members that stepped down"]++
	}
	for _, part := range held {
		if part.Context().Err() == nil || part.Valid() {
			t.Fatalf("partition %d still live after its member stepped down", part.ID())
		}
	}
	time.Sleep(ttl) // 2 TTLs of outage in all: the old leases expire on the server
	proxy.Heal()
	a2 := coordtest.Recv(t, pa.members, 20*time.Second, "process A joined again")
	b2 := coordtest.Recv(t, pb.members, 20*time.Second, "process B joined again")
	coordtest.Until(t, 20*time.Second, 10*time.Millisecond, "the group re-formed: every partition held once", func() bool {
		return len(a2.Owned())+len(b2.Owned()) == p && len(a2.Owned()) >= p/2-1 && len(b2.Owned()) >= p/2-1
	})
	for _, m := range []*ownership.Member{a2, b2} {
		for _, part := range m.Owned() {
			if part.Token().Revision() <= old[part.ID()] {
				t.Errorf("partition %d: token %d after the outage, not newer than %d", part.ID(), part.Token().Revision(), old[part.ID()])
			}
		}
	}
	acquired := collect(t, reader.r, "coordkit.ownership.handoff.duration")
	rewrites := collect(t, reader.r, "coordkit.ownership.target_writes") - writes
	t.Logf("after the outage: %d target writes, %d acquisitions in all", rewrites, acquired)
	if rewrites > 4 {
		t.Errorf("%d target writes to re-form 2 members: a herd", rewrites)
	}
	res.Trials++
	res.Outcome["target writes to re-form"] = rewrites
	res.Outcome["acquisitions, before and after"] = acquired
	res.Notes = "P=6, 2 member processes (in-process, one proxied client), TTL 2 s, blackholed 2 TTLs"
	cancel()
	for _, m := range []*ownership.Member{a2, b2} {
		_ = m.Close()
	}
	coordtest.Wait(t, &wg, 10*time.Second, "the member processes stopped")
}
