package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	clusterTTL        = 3 * time.Second
	clusterElectionMs = 1000
)

// fencedCounter is the resource: one counter row, fenced by pgfence, and a log of
// applied increments keyed by their idempotency key, written in the same
// transaction — so an ambiguous outcome (a connection lost at commit) is resolved
// by looking the key up afterwards.
type fencedCounter struct {
	pool  *pgxpool.Pool
	fence *pgfence.Fence
}

func newFencedCounter(t *testing.T) *fencedCounter {
	t.Helper()
	db := coordtest.Postgres(t)
	ctx := context.Background()
	fence, err := pgfence.New(pgfence.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE counter (id int PRIMARY KEY, value bigint NOT NULL);
		INSERT INTO counter VALUES (1, 0);
		CREATE TABLE applied (id text PRIMARY KEY, token bigint NOT NULL, value bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &fencedCounter{pool: db.Pool, fence: fence}
}

// incr applies one fenced increment. ok reports the resource's answer; known is
// false when the outcome is ambiguous (resolve it with lookup).
func (c *fencedCounter) incr(ctx context.Context, tok coord.Token, id string) (out RegisterOutput, known bool) {
	var value int64
	err := c.fence.Exec(ctx, c.pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `UPDATE counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&value); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO applied (id, token, value) VALUES ($1, $2, $3)`, id, tok.Revision(), value)
		return err
	})
	switch {
	case err == nil:
		return RegisterOutput{Accepted: true, Value: value}, true
	case errors.Is(err, coord.ErrStaleToken):
		return RegisterOutput{}, true
	}
	return RegisterOutput{}, false
}

// lookup resolves an ambiguous increment through its idempotency key.
func (c *fencedCounter) lookup(ctx context.Context, id string) (RegisterOutput, bool, error) {
	var value int64
	err := c.pool.QueryRow(ctx, `SELECT value FROM applied WHERE id = $1`, id).Scan(&value)
	if errors.Is(err, pgx.ErrNoRows) {
		return RegisterOutput{}, false, nil
	}
	return RegisterOutput{Accepted: true, Value: value}, err == nil, err
}

func (c *fencedCounter) read(ctx context.Context) (int64, error) {
	var v int64
	err := c.pool.QueryRow(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&v)
	return v, err
}

// TestFencedIncrementsUnderClusterFaults: a 3-member etcd cluster (processes) has
// members killed and restarted, its raft leader restarted, and lease holders cut
// off from it (every connection of the holder blackholed), while 8 clients elect a
// leader with correctnesslease.Run and the leader does fenced increments. The
// history is linearizable for a fenced register (porcupine), accepted tokens never
// decrease, no acknowledged increment is lost, and failover takes at most
// TTL + 2 election timeouts after a fault ends a term.
func TestFencedIncrementsUnderClusterFaults(t *testing.T) {
	duration := coordtest.Pick(20*time.Second, 60*time.Second)
	res := coordtest.NewResult("fenced increments, 3-member etcd under faults")
	defer coordtest.Report(t, res)

	cluster := coordtest.EtcdCluster(t, 3, &coordtest.EtcdClusterOpts{ElectionMs: clusterElectionMs})
	counter := newFencedCounter(t)
	hist := NewHistory()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	const clients = 8
	type client struct {
		proxies []*coordtest.Proxy
	}
	cs := make([]*client, clients)
	var mu sync.Mutex
	holder := -1 // the client whose term started last
	var ambiguous []struct {
		client    int
		in        RegisterInput
		call, ret int64
	}

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var wg sync.WaitGroup
	for i := range cs {
		c := &client{}
		var eps []string
		for _, m := range cluster.Members {
			p := coordtest.NewProxy(t, m.ClientURL[len("http://"):])
			c.proxies = append(c.proxies, p)
			eps = append(eps, p.URL())
		}
		cs[i] = c
		cli := coordtest.NewEtcdClient(t, eps...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := 0
			for ctx.Err() == nil {
				sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "rel", TTL: clusterTTL, Logger: quiet})
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				correctnesslease.Run(ctx, sess, "counter", func(lctx context.Context, tok coord.Token) error {
					mu.Lock()
					holder = i
					mu.Unlock()
					for {
						// Like a real worker, check authority only between writes; a write
						// in flight when authority is lost goes out with its old token and
						// the fence must stop it.
						if lctx.Err() != nil {
							return nil
						}
						seq++
						in := RegisterInput{Kind: OpIncr, Token: tok.Revision(), ID: fmt.Sprintf("c%d-%d", i, seq)}
						call := hist.Since()
						octx, ocancel := context.WithTimeout(context.WithoutCancel(lctx), 5*time.Second)
						out, known := counter.incr(octx, tok, in.ID)
						ocancel()
						ret := hist.Since()
						if known {
							hist.Add(i, in, out, call, ret)
						} else {
							mu.Lock()
							ambiguous = append(ambiguous, struct {
								client    int
								in        RegisterInput
								call, ret int64
							}{i, in, call, ret})
							mu.Unlock()
						}
						if i%2 == 0 { // half the clients also read
							call := hist.Since()
							if v, err := counter.read(context.WithoutCancel(lctx)); err == nil {
								hist.Add(i, RegisterInput{Kind: OpRead}, RegisterOutput{Value: v}, call, hist.Since())
							}
						}
					}
				}, &correctnesslease.RunOpts{Drain: 10 * time.Second})
				sess.Close(context.Background())
			}
		}()
	}

	// The nemesis: one fault at a time, every few seconds, cycling through the
	// kinds so each happens in the bounded tier; which member is random.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	admin := cluster.Client(t)
	for round := 0; ctx.Err() == nil; round++ {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		if ctx.Err() != nil {
			break
		}
		switch []int{2, 0, 2, 1}[round%4] {
		case 0: // kill a member, restart it a little later
			m := rng.IntN(len(cluster.Members))
			cluster.Members[m].Kill()
			res.Faults["member killed"]++
			time.Sleep(2 * time.Second)
			cluster.RestartMember(t, m)
			res.Faults["member restarted"]++
		case 1: // restart the raft leader
			lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
			l := cluster.Leader(lctx, admin)
			lcancel()
			if l >= 0 {
				cluster.RestartMember(t, l)
				res.Faults["raft leader restarted"]++
			}
		case 2: // cut the current holder off from etcd (all its connections)
			mu.Lock()
			h := holder
			mu.Unlock()
			if h < 0 {
				continue
			}
			for _, p := range cs[h].proxies {
				p.Blackhole()
			}
			res.Faults["holder partitioned"]++
			time.Sleep(clusterTTL + time.Second)
			for _, p := range cs[h].proxies {
				p.Heal()
				p.Cut() // drop the hung connections so the client redials
			}
		}
	}
	cancel()
	wg.Wait()

	// Resolve ambiguous outcomes through the idempotency keys.
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for _, a := range ambiguous {
		out, applied, err := counter.lookup(rctx, a.in.ID)
		if err != nil {
			t.Fatal(err)
		}
		res.Outcome["ambiguous resolved"]++
		if applied {
			// It took effect at some point after its call: let it linearize anywhere later.
			hist.Add(a.client, a.in, out, a.call, 1<<62)
		}
	}

	var accepted, rejected int64
	var tokens []int64
	for _, op := range hist.ops {
		if op.Input.(RegisterInput).Kind != OpIncr {
			continue
		}
		if op.Output.(RegisterOutput).Accepted {
			accepted++
		} else {
			rejected++
		}
	}
	final, err := counter.read(rctx)
	if err != nil {
		t.Fatal(err)
	}
	res.Trials = hist.Len()
	res.Outcome["increments accepted"] = accepted
	res.Outcome["stale increments rejected"] = rejected
	res.Outcome["final counter"] = final
	res.Outcome["token regressions"] = int64(hist.TokenRegressions())
	for _, op := range hist.ops {
		if in := op.Input.(RegisterInput); in.Kind == OpIncr && op.Output.(RegisterOutput).Accepted {
			tokens = append(tokens, in.Token)
		}
	}
	gap := maxFailoverGap(hist)
	res.Outcome["max failover gap ms"] = gap.Milliseconds()
	res.Outcome["distinct terms"] = int64(len(distinct(tokens)))

	faults := 0
	for _, n := range res.Faults {
		faults += n
	}
	if faults == 0 || len(distinct(tokens)) < 2 {
		t.Fatalf("no fault changed leadership (faults %v, terms %d): the scenario proved nothing", res.Faults, len(distinct(tokens)))
	}
	if final != accepted {
		t.Errorf("counter is %d but %d increments were acknowledged or resolved as applied: lost or phantom increments", final, accepted)
	}
	if r := hist.TokenRegressions(); r != 0 {
		t.Errorf("%d accepted increments carried a token older than an earlier accepted one", r)
	}
	if got := hist.Check(60 * time.Second); got != porcupine.Ok {
		t.Errorf("history of %d operations is not linearizable for a fenced register: %v", hist.Len(), got)
	}
	bound := clusterTTL + 2*clusterElectionMs*time.Millisecond
	res.Notes = fmt.Sprintf("TTL %v, election timeout %d ms: failover bound TTL + 2 election timeouts = %v; measured max gap between two terms' accepted writes %v.", clusterTTL, clusterElectionMs, bound, gap)
	// The partition fault itself lasts TTL + 1 s; the gap may include it, so the
	// bound applies from the fault's start plus the partition's extra second.
	if gap > bound+time.Second {
		t.Errorf("max failover gap %v exceeds TTL + 2 election timeouts (+1 s partition slack) = %v", gap, bound+time.Second)
	}
}

// maxFailoverGap is the longest time between the last accepted increment of one
// term and the first accepted increment of the next.
func maxFailoverGap(h *History) time.Duration {
	type w struct {
		tok      int64
		val, ret int64
	}
	var ws []w
	for _, op := range h.ops {
		in, out := op.Input.(RegisterInput), op.Output.(RegisterOutput)
		if in.Kind == OpIncr && out.Accepted && op.Return < 1<<62 {
			ws = append(ws, w{in.Token, out.Value, op.Return})
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].val < ws[j].val })
	var gap time.Duration
	for i := 1; i < len(ws); i++ {
		if ws[i].tok != ws[i-1].tok {
			gap = max(gap, time.Duration(ws[i].ret-ws[i-1].ret))
		}
	}
	return gap
}

func distinct(xs []int64) map[int64]bool {
	m := map[int64]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}
