package ownership_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

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
		select {
		case <-m.Done():
			res.Faults["members that stepped down"]++
		case <-time.After(2 * ttl):
			t.Fatalf("member %s still running 2 TTLs into the outage", m.ID())
		}
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
