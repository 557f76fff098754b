package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/ownership"
)

const (
	ownPartitions = 12
	ownTTL        = 3 * time.Second // the demo's member TTL; production default is 15 s
	ownEvery      = 100 * time.Millisecond
	ownGroup      = "orders"
)

const ownSchema = `
CREATE TABLE order_partitions (partition int PRIMARY KEY, seq bigint NOT NULL);
INSERT INTO order_partitions SELECT generate_series(0, %d), 0;
CREATE TABLE order_writes (partition int NOT NULL, seq bigint NOT NULL, token bigint NOT NULL, writer text NOT NULL,
	at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (partition, seq));`

// runOwnership: three order processors share 12 partitions through package
// ownership; each writes every 100 ms to each partition it owns, fenced by that
// partition's token. A is frozen (SIGSTOP) past its TTL: its partitions move to
// B and C, the rest never stop; when A resumes, its late writes carry the old
// tokens and pgfence rejects every one.
func runOwnership(ctx context.Context, e *env) (string, bool) {
	if failed := e.setUp(ctx, fmt.Sprintf(ownSchema, ownPartitions-1), pgfence.Config{LeaseTTL: ownTTL}); failed != "" {
		return failed, false
	}
	cli, err := e.etcdClient()
	if err != nil {
		return err.Error(), false
	}
	defer cli.Close()
	step("three order processors, A, B and C, join group %q of %d partitions (member TTL %v; production default 15 s)", ownGroup, ownPartitions, ownTTL)
	events := make(chan event, 1024)
	kids := map[string]*child{}
	ids := map[string]string{} // member id -> name
	for _, name := range []string{"A", "B", "C"} {
		c, err := startChild(name, events, "owner", name, e.etcdEndpoint(), e.url)
		if err != nil {
			return err.Error(), false
		}
		defer c.kill()
		kids[name] = c
		ev, ok := await(events, 20*time.Second, func(ev event) bool { return ev.who == name && ev.kind == "JOINED" })
		if !ok {
			return name + " did not join", false
		}
		ids[ev.fields[0]] = name
	}
	before, ok := ownWaitMap(ctx, cli, ids, nil, 30*time.Second)
	if !ok {
		return "the partitions were never all owned by A, B and C", false
	}
	for _, name := range []string{"A", "B", "C"} {
		step("%s owns partitions %s, each written every %v with its own fencing token", name, strings.Join(ownList(before, name), ","), ownEvery)
	}
	time.Sleep(time.Second)

	if err := kids["A"].freeze(); err != nil {
		return "SIGSTOP: " + err.Error(), false
	}
	frozeAt := time.Now()
	step("A froze (SIGSTOP, as in a long GC pause or a stalled VM) with writes for its partitions about to go out")
	after, ok := ownWaitMap(ctx, cli, ids, map[string]bool{"A": true}, 30*time.Second)
	if !ok {
		return "A's partitions were never taken over", false
	}
	movedIn := time.Since(frozeAt)
	moved, stayed := 0, 0
	for p, o := range before {
		switch {
		case o.name == "A" && after[p].name != "A":
			moved++
		case o.name != "A" && after[p] == o:
			stayed++
		}
	}
	step("A's partitions %s moved after %.1fs: now B owns %s and C owns %s", strings.Join(ownList(before, "A"), ","), movedIn.Seconds(),
		strings.Join(ownList(after, "B"), ","), strings.Join(ownList(after, "C"), ","))
	time.Sleep(500 * time.Millisecond) // the new owners write
	if err := kids["A"].resume(); err != nil {
		return "SIGCONT: " + err.Error(), false
	}
	resumedAt := time.Now()
	step("A resumes (SIGCONT); each of its writers sends the write it had prepared, with its old token…")
	late, rejected := 0, 0
	for late < len(ownList(before, "A")) {
		ev, ok := await(events, 15*time.Second, func(ev event) bool { return ev.who == "A" && ev.kind == "LATE" })
		if !ok {
			break
		}
		late++
		if ev.fields[1] == "rejected" {
			rejected++
		}
	}
	step("…%d late writes, %d rejected by pgfence (stale fencing token), %d accepted", late, rejected, late-rejected)

	// Nobody else stopped: the partitions that stayed kept their writers through
	// A's freeze; the longest gap between two of their writes.
	var gapMs float64
	var staleRows int
	err = e.pool.QueryRow(ctx, `WITH w AS (
			SELECT partition, token, at, lag(at) OVER (PARTITION BY partition ORDER BY seq) AS prev, lag(token) OVER (PARTITION BY partition ORDER BY seq) AS prev_token
			FROM order_writes)
		SELECT coalesce(max(extract(epoch FROM at - prev) * 1000) FILTER (WHERE partition = ANY($1) AND at BETWEEN $2 AND $3), 0),
			count(*) FILTER (WHERE token < prev_token)
		FROM w`, ownStayed(before, after), frozeAt, resumedAt).Scan(&gapMs, &staleRows)
	if err != nil {
		return "count: " + err.Error(), false
	}
	step("the %d partitions of B and C never moved and never stopped: their longest write gap during A's freeze was %.0f ms", stayed, gapMs)
	verdict := fmt.Sprintf("%d of %d of A's partitions moved in %.1fs (TTL %v); A's late writes %d, rejected %d; %d partitions that stayed kept writing (longest gap %.0f ms); stale rows accepted %d",
		moved, len(ownList(before, "A")), movedIn.Seconds(), ownTTL, late, rejected, stayed, gapMs, staleRows)
	return verdict, moved == len(ownList(before, "A")) && moved > 0 && late > 0 && rejected == late &&
		stayed == ownPartitions-moved && gapMs < 1000 && staleRows == 0
}

// ownOwner is who holds a partition, with which token.
type ownOwner struct {
	name  string
	token int64
}

// ownWaitMap waits until every partition is held by the member its target
// assigns it to, every member in ids but the excluded names holds some, and
// nothing moves for 300 ms; it returns partition -> owner.
func ownWaitMap(ctx context.Context, cli *clientv3.Client, ids map[string]string, exclude map[string]bool, timeout time.Duration) (map[int]ownOwner, bool) {
	deadline := time.Now().Add(timeout)
	var last map[int]ownOwner
	var since time.Time
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		m, err := ownership.GroupGet(ctx, cli, "demo", ownGroup)
		if err != nil {
			continue
		}
		out := map[int]ownOwner{}
		holders := map[string]bool{}
		for _, a := range m.Owners {
			if name, ok := ids[a.Owner]; ok && !exclude[name] && a.Owner == a.Target {
				out[a.Partition] = ownOwner{name, a.Revision}
				holders[name] = true
			}
		}
		if len(out) != ownPartitions || len(holders) != len(ids)-len(exclude) {
			last = nil
			continue
		}
		if !maps.Equal(out, last) {
			last, since = out, time.Now()
			continue
		}
		if time.Since(since) >= 300*time.Millisecond {
			return out, true
		}
	}
	return nil, false
}

// ownList returns the partitions name owns, in order.
func ownList(m map[int]ownOwner, name string) []string {
	var ps []int
	for p, o := range m {
		if o.name == name {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	var s []string
	for _, p := range ps {
		s = append(s, strconv.Itoa(p))
	}
	return s
}

// ownStayed returns the partitions whose owner and token did not change.
func ownStayed(before, after map[int]ownOwner) []int {
	var ps []int
	for p, o := range before {
		if after[p] == o {
			ps = append(ps, p)
		}
	}
	return ps
}

// runOwner is one order processor: `-child owner <name> <etcd> <pg>`. It joins
// the group and writes to each partition it owns every ownEvery, fenced by the
// partition's token. After losing a partition (its context ends with
// *coord.AuthorityLostError) it still sends the one write it had prepared, as a
// process frozen between its check and its write would, and reports whether
// the fence let it through.
func runOwner(args []string) int {
	ctx := context.Background()
	name, cli, pool, code := childConnect(ctx, "owner", args)
	if code != 0 {
		return code
	}
	defer cli.Close()
	defer pool.Close()
	fence, err := pgfence.New(pgfence.Config{LeaseTTL: ownTTL, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	g, err := ownership.New(cli, ownership.Config{Tenant: "demo", Group: ownGroup, Partitions: ownPartitions, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "demo", TTL: ownTTL, Logger: quiet})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	m, err := g.Join(ctx, sess, map[string]string{"name": name})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	emit("JOINED", m.ID())
	write := func(p *ownership.Partition, tok coord.Token) error {
		return fence.Exec(context.Background(), pool, tok, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `WITH s AS (UPDATE order_partitions SET seq = seq + 1 WHERE partition = $1 RETURNING seq)
				INSERT INTO order_writes (partition, seq, token, writer) SELECT $1, seq, $2, $3 FROM s`, p.ID(), tok.Revision(), name)
			return err
		})
	}
	writer := func(p *ownership.Partition) {
		tok, pctx := p.Token(), p.Context()
		tick := time.NewTicker(ownEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				err := write(p, tok)
				if errors.Is(err, coord.ErrStaleToken) {
					emit("LATE", p.ID(), "rejected") // the context had not told it yet
					return
				}
			case <-pctx.Done():
				if !errors.Is(context.Cause(pctx), coord.ErrAuthorityLost) {
					p.Done() // a planned revoke: stop and hand it off
					return
				}
				if err := write(p, tok); errors.Is(err, coord.ErrStaleToken) {
					emit("LATE", p.ID(), "rejected")
				} else if err == nil {
					emit("LATE", p.ID(), "accepted")
				} else {
					emit("LATE", p.ID(), "error", strings.ReplaceAll(err.Error(), " ", "_"))
				}
				return
			}
		}
	}
	started := map[[2]int64]bool{}
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	events := m.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok { // the member stopped (its session was lost): the story is over for it
				events = nil
				continue
			}
			if ev.Kind == ownership.Acquired && !started[[2]int64{int64(ev.Partition.ID()), ev.Partition.Token().Revision()}] {
				started[[2]int64{int64(ev.Partition.ID()), ev.Partition.Token().Revision()}] = true
				go writer(ev.Partition)
			}
		case <-poll.C:
			for _, p := range m.Owned() {
				if k := [2]int64{int64(p.ID()), p.Token().Revision()}; !started[k] {
					started[k] = true
					go writer(p)
				}
			}
		}
	}
}
