package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
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
// together, fenced by tok, and a retried id is a no-op.
func increment(ctx context.Context, f *pgfence.Fence, pool *pgxpool.Pool, tok coord.Token, client int, id string) error {
	return f.Exec(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO incs (id, client, revision) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING`, id, client, tok.Revision())
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE counter SET n = n + 1 WHERE id = 1`)
		return err
	})
}

// runClient campaigns for "counter" until ctx ends, with a new session whenever the
// old one is gone; each term makes up to ten increments, then yields the lease.
func runClient(ctx context.Context, cli *clientv3.Client, f *pgfence.Fence, pool *pgxpool.Pool, client int, log *incrementLog) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	seq := 0
	work := func(ctx context.Context, tok coord.Token) error {
		log.mu.Lock()
		log.terms++
		log.mu.Unlock()
		for i := 0; i < 10 && ctx.Err() == nil; i++ {
			id := fmt.Sprintf("c%d-%d", client, seq)
			seq++
			for attempt := 0; ; attempt++ {
				err := increment(ctx, f, pool, tok, client, id)
				log.record(id, err)
				if err == nil {
					break
				}
				if errors.Is(err, coord.ErrStaleToken) || ctx.Err() != nil || attempt == 5 {
					return err // step down; an ambiguous id stays ambiguous
				}
			}
		}
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
			if err := correctnesslease.Run(ctx, s, "counter", work, &correctnesslease.RunOpts{Backoff: coord.Backoff{Base: 20 * time.Millisecond, Cap: 500 * time.Millisecond}}); errors.Is(err, correctnesslease.ErrDrainExceeded) {
				time.Sleep(time.Second) // the work is stuck in a cancelled query; let it return
			}
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = s.Close(cctx)
		cancel()
	}
}

// TestClusterFaultsKeepFencedIncrementsExact: a 3-member etcd cluster loses a
// member, gets it back, then has its leader restarted, while 8 clients take turns
// as holder of one lease and make fenced, idempotent increments. The resource must
// see tokens that never decrease, and every increment exactly once.
func TestClusterFaultsKeepFencedIncrementsExact(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult("fenced exactly-once increments, 3-member etcd loses a member and its leader")
	res.Package = "correctnesslease/pgfence"
	defer coordtest.Report(t, res)
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
	for i := range logs {
		logs[i] = &incrementLog{acked: map[string]bool{}, rejected: map[string]bool{}, ambiguous: map[string]bool{}}
		clis[i] = cluster.Client(t)
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { runClient(workCtx, clis[i], f, db.Pool, i, logs[i]) })
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
	leader := cluster.Leader(ctx, admin)
	if leader < 0 {
		t.Fatal("no etcd leader")
	}
	follower := (leader + 1) % 3
	cluster.Members[follower].Kill()
	progress(fmt.Sprintf("member m%d killed", follower), 3*time.Second, 50)
	if err := cluster.Members[follower].Start(); err != nil {
		t.Fatal(err)
	}
	cluster.Members[follower].WaitOutput(t, "ready", 60*time.Second)
	leader = cluster.Leader(ctx, admin)
	if leader < 0 {
		t.Fatal("no etcd leader after the member rejoined")
	}
	cluster.RestartMember(t, leader)
	progress(fmt.Sprintf("leader m%d restarted", leader), 4*time.Second, 50)
	newLeader := cluster.Leader(ctx, admin)
	stopWork()
	wg.Wait()

	fs, ls := cluster.Members[follower].Stats(), cluster.Members[leader].Stats()
	if fs.Kills < 1 || fs.Starts < 2 || ls.Kills < 1 || ls.Starts < 2 {
		t.Fatalf("faults not injected: follower %+v, leader %+v", fs, ls)
	}
	if follower == leader { // the rejoined follower became leader: one member, both faults
		res.Faults["follower killed and restarted"] = fs.Kills - 1
		res.Faults["raft leader restarted"] = 1
	} else {
		res.Faults["follower killed and restarted"] = fs.Kills
		res.Faults["raft leader restarted"] = ls.Kills
	}

	// The resource's view.
	rows, err := db.Pool.Query(ctx, "SELECT id, revision FROM incs ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]bool{}
	var last int64
	revisions := map[int64]bool{}
	for rows.Next() {
		var id string
		var rev int64
		if err := rows.Scan(&id, &rev); err != nil {
			t.Fatal(err)
		}
		if rev < last {
			t.Errorf("accepted token went back: revision %d after %d (increment %s)", rev, last, id)
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
				t.Errorf("acknowledged increment %s lost", id)
			}
		}
		for id := range l.rejected {
			rejected++
			if applied[id] {
				t.Errorf("increment %s applied although its token was rejected", id)
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
			t.Errorf("increment %s applied but never acknowledged nor ambiguous", id)
		}
	}
	if n != int64(len(applied)) {
		t.Errorf("counter %d != %d distinct increments applied (applied twice or lost)", n, len(applied))
	}
	highest, err := f.Highest(ctx, db.Pool, "/tenants/cluster/elections/counter")
	if err != nil || highest != last {
		t.Errorf("fence table holds %d (%v), the newest applied increment %d", highest, err, last)
	}
	t.Logf("cluster faults: follower m%d killed+restarted, leader m%d restarted (leader now m%d); "+
		"counter %d, acknowledged %d, rejected stale %d, ambiguous %d (resolved by id), terms %d, distinct tokens accepted %d",
		follower, leader, newLeader, n, acked, rejected, ambiguous, terms, len(revisions))
	res.Trials = acked + rejected + ambiguous
	res.Outcome["final counter"] = n
	res.Outcome["distinct increments applied"] = int64(len(applied))
	res.Outcome["increments acknowledged"] = int64(acked)
	res.Outcome["stale increments rejected"] = int64(rejected)
	res.Outcome["ambiguous (resolved by id)"] = int64(ambiguous)
	res.Outcome["lease terms"] = int64(terms)
	res.Outcome["distinct tokens accepted"] = int64(len(revisions))
	res.Notes = "8 clients take turns holding one lease (TTL 3 s); trials = increments attempted; checked: every acknowledged increment applied once, accepted tokens never decrease"
	if len(revisions) < 3 {
		t.Errorf("only %d tokens accepted: leadership barely changed", len(revisions))
	}
}
