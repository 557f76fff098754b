package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// incrementLog is what one client knows about its increments: each has an id, and
// each attempt ends acknowledged, definitely rejected (stale token: rolled back)
// or ambiguous (an error that may have come after the commit).
type incrementLog struct {
	mu        sync.Mutex
	acked     map[string]bool
	rejected  map[string]bool
	ambiguous map[string]bool
	terms     int
}

func (l *incrementLog) record(id string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked[id] = true
		delete(l.ambiguous, id)
	case errors.Is(err, coord.ErrStaleToken) && !l.ambiguous[id]:
		l.rejected[id] = true
	default:
		l.ambiguous[id] = true
		delete(l.rejected, id)
	}
}

// increment applies id at most once: the id row and the counter bump commit
// together, fenced by tok, and a retried id is a no-op. With unfenced (only for
// the test that proves the scenario notices) the fence is left out.
func increment(ctx context.Context, f *pgfence.Fence, pool *pgxpool.Pool, tok coord.Token, client int, id string, unfenced bool) error {
	apply := func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO incs (id, client, revision) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, id, client, tok.Revision())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE counter SET n = n + 1 WHERE id = 1`)
		return err
	}
	if unfenced {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return apply(ctx, tx) })
	}
	return f.Exec(ctx, pool, tok, apply)
}

// zombies arms the term the scenario partitions: the next term to start after
// arm is called writes until it loses the lease, and then keeps writing with its
// old token (a process that passed its authority check and then stalled), until
// the resource rejects it or zombieFor passes.
type zombies struct {
	mu       sync.Mutex
	want     bool           // arm the next term to start
	picked   chan int       // the armed term's client
	armed    map[int64]bool // tokens (revisions) of armed terms
	started  int            // zombie terms: wrote after their loss
	rejected int            // ... stopped by the fence
	survived int            // ... never stopped
}

// arm asks for the next term to be armed and returns its client.
func (zs *zombies) arm(t *testing.T) int {
	t.Helper()
	zs.mu.Lock()
	zs.want = true
	zs.mu.Unlock()
	select {
	case c := <-zs.picked:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no lease term started within 30s to arm as a zombie")
		return -1
	}
}

const zombieFor = 8 * time.Second

// runClient campaigns for "counter" until ctx ends, with a new session whenever the
// old one is gone; each term makes up to ten increments, then yields the lease. An
// armed term (partitioned by the scenario) writes until it loses the lease, and
// then on as a zombie.
func runClient(ctx context.Context, cli *clientv3.Client, f *pgfence.Fence, pool *pgxpool.Pool, client int, log *incrementLog, zs *zombies, unfenced bool) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seq := 0
	next := func() string { seq++; return fmt.Sprintf("c%d-%d", client, seq-1) }
	work := func(ctx context.Context, tok coord.Token) error {
		log.mu.Lock()
		log.terms++
		log.mu.Unlock()
		zs.mu.Lock()
		if zs.want {
			zs.want, zs.armed[tok.Revision()] = false, true
			zs.picked <- client
		}
		zs.mu.Unlock()
		isArmed := func() bool { zs.mu.Lock(); defer zs.mu.Unlock(); return zs.armed[tok.Revision()] }
		for i := 0; (i < 10 || isArmed()) && ctx.Err() == nil; i++ {
			id := next()
			for attempt := 0; ; attempt++ {
				err := increment(ctx, f, pool, tok, client, id, unfenced)
				log.record(id, err)
				if err == nil {
					break
				}
				if errors.Is(err, coord.ErrStaleToken) || ctx.Err() != nil || attempt == 5 {
					if !isArmed() {
						return err // step down; an ambiguous id stays ambiguous
					}
					break
				}
			}
		}
		if !isArmed() {
			return ctx.Err()
		}
		zs.mu.Lock()
		delete(zs.armed, tok.Revision())
		zs.started++
		zs.mu.Unlock()
		// The zombie: the lease is gone, its old token still goes out.
		wctx := context.WithoutCancel(ctx)
		for until := time.Now().Add(zombieFor); time.Now().Before(until); time.Sleep(20 * time.Millisecond) {
			id := next()
			octx, cancel := context.WithTimeout(wctx, 5*time.Second)
			err := increment(octx, f, pool, tok, client, id, unfenced)
			cancel()
			log.record(id, err)
			if errors.Is(err, coord.ErrStaleToken) {
				zs.mu.Lock()
				zs.rejected++
				zs.mu.Unlock()
				return err
			}
		}
		zs.mu.Lock()
		zs.survived++
		zs.mu.Unlock()
		return ctx.Err()
	}
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := correctnesslease.NewSession(sctx, cli, correctnesslease.Config{Tenant: "cluster", TTL: 3 * time.Second, Logger: quiet})
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ctx.Err() == nil && s.Err() == nil {
			if err := correctnesslease.Run(ctx, s, "counter", work, &correctnesslease.RunOpts{
				Drain:   zombieFor + 5*time.Second,
				Backoff: coord.Backoff{Base: 20 * time.Millisecond, Cap: 500 * time.Millisecond},
			}); errors.Is(err, correctnesslease.ErrDrainExceeded) {
				time.Sleep(time.Second) // the work is stuck in a cancelled query; let it return
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = s.Close(cctx)
		cancel()
	}
}

// clusterOutcome is what one run of the scenario observed; violations is what
// it found wrong.
type clusterOutcome struct {
	faults     map[string]int
	outcome    map[string]int64
	trials     int
	violations []string
}

func (o *clusterOutcome) violate(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

// TestClusterFaultsKeepFencedIncrementsExact: a 3-member etcd cluster loses a
// member, gets it back, then has its leader restarted, and the lease holder is
// partitioned from it, while 8 clients take turns as holder of one lease and make
// fenced, idempotent increments. The partitioned holder turns zombie and keeps
// writing with its old token after losing the lease: the fence must reject it.
// The resource must see tokens that never decrease, and every increment exactly
// once.
func TestClusterFaultsKeepFencedIncrementsExact(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "fenced exactly-once increments, 3-member etcd loses a member and its leader, holder partitioned",
		coordtest.Faults("follower killed and restarted", "raft leader restarted", "holder partitioned", "zombie holder wrote with its old token"))
	defer coordtest.Report(t, res)
	o := runClusterScenario(t, true, false)
	res.Trials, res.Faults, res.Outcome = o.trials, o.faults, o.outcome
	res.Notes = "8 clients take turns holding one lease (TTL 3 s); trials = increments attempted; checked: every acknowledged increment applied once, accepted tokens never decrease; " +
		"the partitioned holder keeps writing with its old token after losing the lease (up to 8 s) until the fence rejects it"
	for _, v := range o.violations {
		t.Error(v)
	}
	if o.outcome["stale increments rejected"] == 0 {
		t.Error("no stale increment was rejected: the fence was never exercised")
	}
}

// TestClusterScenarioCatchesAnUnfencedResource runs the scenario (warm-up and the
// partition) with the increments' fence left out: it must report the zombie's
// stale writes as accepted. If it did not, its passing with the fence would
// prove nothing.
func TestClusterScenarioCatchesAnUnfencedResource(t *testing.T) {
	t.Parallel()
	o := runClusterScenario(t, false, true)
	if o.faults["zombie holder wrote with its old token"] == 0 {
		t.Fatalf("no zombie wrote (faults %v): the run cannot tell", o.faults)
	}
	for _, want := range []string{"accepted token went back", "was never rejected"} {
		found := false
		for _, v := range o.violations {
			found = found || strings.Contains(v, want)
		}
		if !found {
			t.Errorf("against an unfenced resource the scenario did not report %q; violations: %q", want, o.violations)
		}
	}
	t.Logf("violations reported, as they must be: %d (first: %q)", len(o.violations), o.violations[0])
}

// runClusterScenario runs the clients against a 3-member cluster: warm-up, then
// (with memberFaults) a follower killed and restarted and the leader restarted,
// then the holder partitioned. It returns the faults and figures it observed and
// the violations it found; infrastructure failures fail t.
func runClusterScenario(t *testing.T, memberFaults, unfenced bool) *clusterOutcome {
	o := &clusterOutcome{faults: map[string]int{}, outcome: map[string]int64{}}
	cluster := coordtest.EtcdCluster(t, 3, nil)
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	f, err := pgfence.New(pgfence.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `
		CREATE TABLE incs (seq bigserial PRIMARY KEY, id text UNIQUE NOT NULL, client int NOT NULL, revision bigint NOT NULL);
		CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL);
		INSERT INTO counter VALUES (1, 0)`); err != nil {
		t.Fatal(err)
	}
	admin := cluster.Client(t)
	const clients = 8
	logs := make([]*incrementLog, clients)
	clis := make([]*clientv3.Client, clients)
	proxies := make([][]*coordtest.Proxy, clients) // each client reaches every member through its own proxies
	for i := range logs {
		logs[i] = &incrementLog{acked: map[string]bool{}, rejected: map[string]bool{}, ambiguous: map[string]bool{}}
		var eps []string
		for _, m := range cluster.Members {
			p := coordtest.NewProxy(t, strings.TrimPrefix(m.ClientURL, "http://"))
			proxies[i] = append(proxies[i], p)
			eps = append(eps, p.URL())
		}
		clis[i] = coordtest.NewEtcdClient(t, eps...)
	}
	zs := &zombies{picked: make(chan int, 1), armed: map[int64]bool{}}
	workCtx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { runClient(workCtx, clis[i], f, db.Pool, i, logs[i], zs, unfenced) })
	}
	defer func() { stopWork(); wg.Wait() }()

	count := func() int64 {
		var n int64
		if err := db.Pool.QueryRow(ctx, "SELECT n FROM counter").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// progress keeps the load running for at least d and until more increments
	// landed: each fault is held while the clients work through it.
	progress := func(phase string, d time.Duration, more int64) int64 {
		t.Helper()
		from, start := count(), time.Now()
		for count() < from+more || time.Since(start) < d {
			if time.Since(start) > 45*time.Second {
				t.Fatalf("%s: only %d increments in 45s", phase, count()-from)
			}
			time.Sleep(50 * time.Millisecond)
		}
		n := count()
		t.Logf("%s: %d increments in %v", phase, n-from, time.Since(start).Round(time.Millisecond))
		return n
	}
	progress("warm-up", time.Second, 50)
	follower, leader := -1, -1
	if memberFaults {
		leader = cluster.Leader(ctx, admin)
		if leader < 0 {
			t.Fatal("no etcd leader")
		}
		follower = (leader + 1) % 3
		cluster.Members[follower].Kill()
		progress(fmt.Sprintf("member m%d killed", follower), 3*time.Second, 50)
		if err := cluster.Members[follower].Start(); err != nil { // returns once the member is ready
			t.Fatal(err)
		}
		leader = cluster.Leader(ctx, admin)
		if leader < 0 {
			t.Fatal("no etcd leader after the member rejoined")
		}
		cluster.RestartMember(t, leader)
		progress(fmt.Sprintf("leader m%d restarted", leader), 4*time.Second, 50)
	}

	// The holder partitioned from etcd: it steps down, a rival takes over, and the
	// holder, a zombie, keeps writing with its old token. Once in the bounded tier,
	// three times in the full one.
	for round := range coordtest.Pick(1, 3) {
		h := zs.arm(t)
		var dropped int64
		for _, p := range proxies[h] {
			dropped -= p.Stats().DroppedBytes
			p.Blackhole()
		}
		for deadline := time.Now().Add(zombieFor + 15*time.Second); ; time.Sleep(50 * time.Millisecond) {
			zs.mu.Lock()
			done := zs.started > round && zs.rejected+zs.survived == zs.started
			zs.mu.Unlock()
			if done {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the partitioned holder (client %d) never turned zombie and ended", h)
			}
		}
		for _, p := range proxies[h] {
			p.Heal()
			p.Cut()
			dropped += p.Stats().DroppedBytes
		}
		if dropped > 0 {
			o.faults["holder partitioned"]++
		}
		progress(fmt.Sprintf("holder c%d partitioned, turned zombie", h), time.Second, 50)
	}
	stopWork()
	coordtest.Wait(t, &wg, 60*time.Second, "the writers, after stopWork")

	if memberFaults {
		fs, ls := cluster.Members[follower].Stats(), cluster.Members[leader].Stats()
		if follower == leader { // the rejoined follower became leader: one member, both faults
			o.faults["follower killed and restarted"] = min(fs.Kills-1, fs.Starts-2)
			o.faults["raft leader restarted"] = 1
		} else {
			o.faults["follower killed and restarted"] = min(fs.Kills, fs.Starts-1)
			o.faults["raft leader restarted"] = min(ls.Kills, ls.Starts-1)
		}
	}
	o.faults["zombie holder wrote with its old token"] = zs.started
	if zs.survived > 0 {
		o.violate("%d zombie holder(s) wrote with the old token for %v after losing the lease and %s", zs.survived, zombieFor, "was never rejected")
	}

	// The resource's view.
	rows, err := db.Pool.Query(ctx, "SELECT id, revision FROM incs ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]bool{}
	var last int64
	regressions := 0
	revisions := map[int64]bool{}
	for rows.Next() {
		var id string
		var rev int64
		if err := rows.Scan(&id, &rev); err != nil {
			t.Fatal(err)
		}
		if rev < last {
			regressions++
			if regressions <= 3 {
				o.violate("accepted token went back: revision %d after %d (increment %s)", rev, last, id)
			}
		}
		last = max(last, rev)
		applied[id] = true
		revisions[rev] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	n := count()
	var acked, rejected, ambiguous, terms int
	for _, l := range logs {
		terms += l.terms
		for id := range l.acked {
			acked++
			if !applied[id] {
				o.violate("acknowledged increment %s lost", id)
			}
		}
		for id := range l.rejected {
			rejected++
			if applied[id] {
				o.violate("increment %s applied although its token was rejected", id)
			}
		}
		ambiguous += len(l.ambiguous)
	}
	for id := range applied {
		attempted := false
		for _, l := range logs {
			attempted = attempted || l.acked[id] || l.ambiguous[id]
		}
		if !attempted {
			o.violate("increment %s applied but never acknowledged nor ambiguous", id)
		}
	}
	if n != int64(len(applied)) {
		o.violate("counter %d != %d distinct increments applied (applied twice or lost)", n, len(applied))
	}
	if !unfenced {
		highest, err := f.Highest(ctx, db.Pool, "/tenants/cluster/elections/counter")
		if err != nil || highest != last {
			o.violate("fence table holds %d (%v), the newest applied increment %d", highest, err, last)
		}
	}
	t.Logf("cluster faults %v; counter %d, acknowledged %d, rejected stale %d, ambiguous %d (resolved by id), terms %d, distinct tokens accepted %d, token regressions %d",
		o.faults, n, acked, rejected, ambiguous, terms, len(revisions), regressions)
	o.trials = acked + rejected + ambiguous
	o.outcome["final counter"] = n
	o.outcome["distinct increments applied"] = int64(len(applied))
	o.outcome["increments acknowledged"] = int64(acked)
	o.outcome["stale increments rejected"] = int64(rejected)
	o.outcome["zombies stopped by the fence"] = int64(zs.rejected)
	o.outcome["ambiguous (resolved by id)"] = int64(ambiguous)
	o.outcome["lease terms"] = int64(terms)
	o.outcome["distinct tokens accepted"] = int64(len(revisions))
	o.outcome["token regressions"] = int64(regressions)
	if memberFaults && len(revisions) < 3 {
		o.violate("only %d tokens accepted: leadership barely changed", len(revisions))
	}
	return o
}
