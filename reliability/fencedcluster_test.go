package reliability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
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
// by looking the key up afterwards. An unfenced counter is the same resource with
// the fence left out, for the test that proves the scenario notices.
type fencedCounter struct {
	pool     *pgxpool.Pool
	fence    *pgfence.Fence
	unfenced bool
}

func newFencedCounter(t *testing.T, unfenced bool) *fencedCounter {
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
	return &fencedCounter{pool: db.Pool, fence: fence, unfenced: unfenced}
}

// incr applies one fenced increment. ok reports the resource's answer; known is
// false when the outcome is ambiguous (resolve it with lookup).
func (c *fencedCounter) incr(ctx context.Context, tok coord.Token, id string) (out RegisterOutput, known bool) {
	var value int64
	apply := func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `UPDATE counter SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&value); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO applied (id, token, value) VALUES ($1, $2, $3)`, id, tok.Revision(), value)
		return err
	}
	var err error
	if c.unfenced {
		err = pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error { return apply(ctx, tx) })
	} else {
		err = c.fence.Exec(ctx, c.pool, tok, apply)
	}
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

// The nemesis's faults, one at a time, in this order, round after round.
const (
	faultPartition     = "holder partitioned"
	faultMemberKill    = "member killed"
	faultMemberRestart = "member restarted"
	faultLeaderRestart = "raft leader restarted"
	faultZombie        = "zombie holder wrote with its old token after losing the lease"
)

// clusterRun configures one run of the scenario.
type clusterRun struct {
	duration time.Duration // at least; the nemesis also waits for each kind of fault to happen once
	faults   []int         // the nemesis's cycle: 0 kill+restart a member, 1 restart the raft leader, 2 partition the holder
}

// clusterVerdict is what a run observed, and what it found wrong.
type clusterVerdict struct {
	trials     int
	faults     map[string]int
	outcome    map[string]int64
	notes      string
	violations []string
}

func (v *clusterVerdict) violate(format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

// zombieWatch tracks the holder the nemesis partitions: that term, once it has
// lost the lease, keeps writing with its old token (a process that passed its
// authority check and then stalled, as in a GC pause) until the resource rejects
// it or zombieFor has passed.
type zombieWatch struct {
	mu       sync.Mutex
	armed    map[int64]bool // tokens (revisions) of partitioned holders
	zombies  int            // terms that wrote after their loss
	rejected int            // ... and were stopped by the fence
	survived []string       // ... and were never stopped (zombieFor ran out)
}

const zombieFor = 8 * time.Second

// TestFencedIncrementsUnderClusterFaults: a 3-member etcd cluster (processes) has
// members killed and restarted, its raft leader restarted, and lease holders cut
// off from it (every connection of the holder blackholed), while 8 clients elect a
// leader with correctnesslease.Run and the leader does fenced increments. A
// partitioned holder becomes a zombie: it keeps writing with its old token after
// it lost the lease, and the fence must reject it (stale writes rejected > 0 in
// every run). The history is linearizable for a fenced register (porcupine),
// accepted tokens never decrease, no acknowledged increment is lost, and failover
// takes at most TTL + 2 election timeouts after a fault ends a term.
func TestFencedIncrementsUnderClusterFaults(t *testing.T) {
	res := coordtest.NewResult(t, "fenced increments, 3-member etcd under faults",
		coordtest.Faults(faultPartition, faultMemberKill, faultMemberRestart, faultLeaderRestart, faultZombie))
	defer coordtest.Report(t, res)
	v := runFencedCluster(t, newFencedCounter(t, false), clusterRun{
		duration: coordtest.Pick(20*time.Second, 60*time.Second),
		faults:   []int{2, 0, 2, 1},
	})
	res.Trials, res.Faults, res.Outcome, res.Notes = v.trials, v.faults, v.outcome, v.notes
	for _, msg := range v.violations {
		t.Error(msg)
	}
	if res.Outcome["stale increments rejected"] == 0 {
		t.Error("no stale increment was rejected: the fence was never exercised")
	}
}

// TestFencedClusterScenarioCatchesAnUnfencedResource runs the same scenario
// (partitions only, so zombies) against the counter without its fence: the
// scenario must report the zombie's accepted stale writes. If it did not, its
// passing on the fenced counter would prove nothing.
func TestFencedClusterScenarioCatchesAnUnfencedResource(t *testing.T) {
	v := runFencedCluster(t, newFencedCounter(t, true), clusterRun{duration: 5 * time.Second, faults: []int{2}})
	if v.faults[faultZombie] == 0 {
		t.Fatalf("no zombie wrote (faults %v): the run cannot tell", v.faults)
	}
	found := map[string]bool{}
	for _, msg := range v.violations {
		t.Logf("violation found, as it must be: %s", msg)
		for _, want := range []string{"never rejected", "token older than", "not linearizable"} {
			found[want] = found[want] || strings.Contains(msg, want)
		}
	}
	for _, want := range []string{"never rejected", "token older than", "not linearizable"} {
		if !found[want] {
			t.Errorf("against an unfenced resource the scenario did not report %q; violations: %q", want, v.violations)
		}
	}
}

// runFencedCluster runs the scenario against counter and returns what it saw.
// Infrastructure failures (servers that do not start) fail t; what the scenario
// checks is returned as violations.
func runFencedCluster(t *testing.T, counter *fencedCounter, run clusterRun) *clusterVerdict {
	v := &clusterVerdict{faults: map[string]int{}, outcome: map[string]int64{}}
	cluster := coordtest.EtcdCluster(t, 3, &coordtest.EtcdClusterOpts{ElectionMs: clusterElectionMs})
	hist := NewHistory()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	const clients = 8
	type client struct {
		proxies []*coordtest.Proxy
	}
	cs := make([]*client, clients)
	var mu sync.Mutex
	holder, holderTok := -1, int64(0) // the client whose term is running (-1: none), and its token
	zw := &zombieWatch{armed: map[int64]bool{}}
	var ambiguous []struct {
		client    int
		in        RegisterInput
		call, ret int64
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
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
			// write makes one increment with tok and records it; it returns the
			// resource's answer (known false: ambiguous).
			write := func(lctx context.Context, tok coord.Token, zombie bool) (RegisterOutput, bool) {
				seq++
				in := RegisterInput{Kind: OpIncr, Token: tok.Revision(), ID: fmt.Sprintf("c%d-%d", i, seq), Zombie: zombie}
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
				return out, known
			}
			for ctx.Err() == nil {
				sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "rel", TTL: clusterTTL, Logger: quiet})
				if err != nil {
					time.Sleep(200 * time.Millisecond)
					continue
				}
				correctnesslease.Run(ctx, sess, "counter", func(lctx context.Context, tok coord.Token) error {
					mu.Lock()
					holder, holderTok = i, tok.Revision()
					mu.Unlock()
					for {
						// Like a real worker, check authority only between writes; a write
						// in flight when authority is lost goes out with its old token and
						// the fence must stop it.
						if lctx.Err() != nil {
							mu.Lock()
							if holderTok == tok.Revision() {
								holder = -1
							}
							mu.Unlock()
							break
						}
						write(lctx, tok, false)
						if i%2 == 0 { // half the clients also read
							call := hist.Since()
							if v, err := counter.read(context.WithoutCancel(lctx)); err == nil {
								hist.Add(i, RegisterInput{Kind: OpRead}, RegisterOutput{Value: v}, call, hist.Since())
							}
						}
					}
					zw.mu.Lock()
					armed := zw.armed[tok.Revision()]
					delete(zw.armed, tok.Revision())
					if armed {
						zw.zombies++
					}
					zw.mu.Unlock()
					if !armed {
						return nil
					}
					// The zombie: it lost the lease while partitioned and keeps writing
					// with its old token until the resource says it is stale.
					for until := time.Now().Add(zombieFor); time.Now().Before(until); {
						if out, known := write(lctx, tok, true); known && !out.Accepted {
							zw.mu.Lock()
							zw.rejected++
							zw.mu.Unlock()
							return nil
						}
						time.Sleep(20 * time.Millisecond)
					}
					zw.mu.Lock()
					zw.survived = append(zw.survived, fmt.Sprintf("client %d token %d", i, tok.Revision()))
					zw.mu.Unlock()
					return nil
				}, &correctnesslease.RunOpts{Drain: zombieFor + 5*time.Second})
				sess.Close(context.Background())
			}
		}()
	}

	// The nemesis: one fault at a time, every couple of seconds, cycling through
	// run.faults, until the duration has passed and each kind has happened once
	// (bounded by duration + 90 s); which member is random.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	admin := cluster.Client(t)
	start := time.Now()
	kinds := map[int][]string{0: {faultMemberKill, faultMemberRestart}, 1: {faultLeaderRestart}, 2: {faultPartition}}
	allHappened := func() bool {
		for _, k := range run.faults {
			for _, f := range kinds[k] {
				if v.faults[f] == 0 {
					return false
				}
			}
		}
		return true
	}
	for round := 0; time.Since(start) < run.duration || !allHappened(); round++ {
		if time.Since(start) > run.duration+90*time.Second {
			v.violate("the nemesis could not inject every kind of fault in %v: %v", time.Since(start).Round(time.Second), v.faults)
			break
		}
		time.Sleep(2 * time.Second)
		switch run.faults[round%len(run.faults)] {
		case 0: // kill a member, restart it a little later
			m := cluster.Members[rng.IntN(len(cluster.Members))]
			before := m.Stats()
			m.Kill()
			time.Sleep(2 * time.Second)
			if err := m.Start(); err != nil { // returns once the member is ready
				t.Fatal(err)
			}
			after := m.Stats()
			v.faults[faultMemberKill] += after.Kills - before.Kills
			v.faults[faultMemberRestart] += after.Starts - before.Starts
		case 1: // restart the raft leader
			lctx, lcancel := context.WithTimeout(context.Background(), 5*time.Second)
			l := cluster.Leader(lctx, admin)
			lcancel()
			if l >= 0 {
				before := cluster.Members[l].Stats().Kills
				cluster.RestartMember(t, l)
				v.faults[faultLeaderRestart] += cluster.Members[l].Stats().Kills - before
			}
		case 2: // cut the current holder off from etcd (all its connections); it turns zombie
			h, tok := -1, int64(0)
			for deadline := time.Now().Add(10 * time.Second); h < 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				mu.Lock()
				h, tok = holder, holderTok
				mu.Unlock()
			}
			if h < 0 {
				continue // no term running for 10 s: the next round tries again
			}
			zw.mu.Lock()
			zw.armed[tok] = true
			zw.mu.Unlock()
			dropped := int64(0)
			for _, p := range cs[h].proxies {
				dropped -= p.Stats().DroppedBytes
				p.Blackhole()
			}
			time.Sleep(clusterTTL + time.Second)
			for _, p := range cs[h].proxies {
				p.Heal()
				p.Cut() // drop the hung connections so the client redials
				dropped += p.Stats().DroppedBytes
			}
			if dropped > 0 {
				v.faults[faultPartition]++
			}
		}
	}
	// Let the last zombie meet the fence (or run out of time) before stopping.
	for deadline := time.Now().Add(zombieFor + 5*time.Second); ; time.Sleep(50 * time.Millisecond) {
		zw.mu.Lock()
		pending := zw.zombies - zw.rejected - len(zw.survived)
		zw.mu.Unlock()
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			v.violate("%d zombie(s) still writing %v after the nemesis stopped", pending, zombieFor+5*time.Second)
			break
		}
	}
	cancel()
	coordtest.Wait(t, &wg, 60*time.Second, "the clients and zombie writers, after cancel")

	// Resolve ambiguous outcomes through the idempotency keys.
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	for _, a := range ambiguous {
		out, applied, err := counter.lookup(rctx, a.in.ID)
		if err != nil {
			t.Fatal(err)
		}
		v.outcome["ambiguous resolved"]++
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
			tokens = append(tokens, op.Input.(RegisterInput).Token)
		} else {
			rejected++
		}
	}
	final, err := counter.read(rctx)
	if err != nil {
		t.Fatal(err)
	}
	v.trials = hist.Len()
	v.faults[faultZombie] = zw.zombies
	v.outcome["increments accepted"] = accepted
	v.outcome["stale increments rejected"] = rejected
	v.outcome["zombies stopped by the fence"] = int64(zw.rejected)
	v.outcome["final counter"] = final
	v.outcome["token regressions"] = int64(hist.TokenRegressions())
	gap := maxFailoverGap(hist)
	v.outcome["max failover gap ms"] = gap.Milliseconds()
	v.outcome["distinct terms"] = int64(len(distinct(tokens)))

	if len(distinct(tokens)) < 2 {
		v.violate("no fault changed leadership (faults %v, terms %d): the scenario proved nothing", v.faults, len(distinct(tokens)))
	}
	for _, z := range zw.survived {
		v.violate("zombie %s wrote with its old token for %v after losing the lease and was never rejected", z, zombieFor)
	}
	if final != accepted {
		v.violate("counter is %d but %d increments were acknowledged or resolved as applied: lost or phantom increments", final, accepted)
	}
	if r := hist.TokenRegressions(); r != 0 {
		v.violate("%d accepted increments carried a token older than an earlier accepted one", r)
	}
	if got := hist.Check(60 * time.Second); got != porcupine.Ok {
		v.violate("history of %d operations is not linearizable for a fenced register: %v", hist.Len(), got)
	}
	bound := clusterTTL + 2*clusterElectionMs*time.Millisecond
	v.notes = fmt.Sprintf("TTL %v, election timeout %d ms: failover bound TTL + 2 election timeouts = %v; measured max gap between two terms' accepted writes %v. "+
		"Each partitioned holder turns zombie: after losing the lease it keeps writing with its old token (for up to %v) until the fence rejects it.",
		clusterTTL, clusterElectionMs, bound, gap, zombieFor)
	// The partition fault itself lasts TTL + 1 s; the gap may include it, so the
	// bound applies from the fault's start plus the partition's extra second.
	if gap > bound+time.Second {
		v.violate("max failover gap %v exceeds TTL + 2 election timeouts (+1 s partition slack) = %v", gap, bound+time.Second)
	}
	return v
}

// maxFailoverGap is the longest time between the last accepted increment of one
// term and the first accepted increment of the next; a zombie's increments (sent
// after its term lost the lease) do not count as the term's.
func maxFailoverGap(h *History) time.Duration {
	type w struct {
		tok      int64
		val, ret int64
	}
	var ws []w
	for _, op := range h.ops {
		in, out := op.Input.(RegisterInput), op.Output.(RegisterOutput)
		if in.Kind == OpIncr && out.Accepted && !in.Zombie && op.Return < 1<<62 {
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
