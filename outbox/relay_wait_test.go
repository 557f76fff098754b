package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A relay facing held keys — the only pending row belongs to a key it cannot
// lock (held by "another relay": the try-lock answers false), no NOTIFY — makes
// an empty claim and then retries shortly, since the holder will let go, but
// backs off: the delays double from 2 ms up to 128 ms, so it does not spin; it
// never calls the publisher with nothing to publish.
func TestRelayFacingHeldKeysBacksOff(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooked, scans := countedTryLock(t, ctx, db, "idle_scans", `
			IF key = (pg_catalog.hashtext('held') & 63) THEN
				RETURN false;
			END IF;`)
	enqueue(t, db.Pool, ob, ev("held", 0))
	rec := newRecorder()
	r := newRelay(t, ob, hooked, rec)
	outbox.ForceKeyed(r) // key locks: a solo relay takes none
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the relay's first locking scan", func() bool { return lastValue(t, db, scans) >= 1 })
	time.Sleep(time.Second)
	// Short retries after 2, 4, 8, … 128 ms: about a dozen in the first second
	// (and the pass the listener's start wakes), then one per 128 ms.
	first := lastValue(t, db, scans)
	if first < 3 || first > 20 {
		t.Fatalf("%d locking scans in the first second facing a held key: want short retries (3 to 20), backing off", first)
	}
	time.Sleep(time.Second)
	if n := lastValue(t, db, scans) - first; n > 10 {
		t.Fatalf("%d more locking scans in the next second: the relay facing a held key spins (want at most one per 128 ms)", n)
	}
	noEmptyBatches(t, rec, r)
}

// An idle relay alone (nothing pending, no NOTIFY) makes an empty claim and then
// waits for its poll interval: nobody holds anything it waits for, so it does not
// retry shortly. Its claims are counted at the relay lease, which a solo claim
// try-locks once.
func TestIdleRelayWaitsForItsPollInterval(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hooked, claims := countedTryLock(t, ctx, db, "idle_claims", "")
	rec := newRecorder()
	r := newRelay(t, ob, hooked, rec)
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the relay's first claim", func() bool { return lastValue(t, db, claims) >= 1 })
	time.Sleep(500 * time.Millisecond)
	// The first pass and, at most, the pass the listener's start wakes.
	if n := lastValue(t, db, claims); n > 3 {
		t.Fatalf("%d claims in 0.5 s with a one-minute poll interval: the idle relay spins", n)
	}
	noEmptyBatches(t, rec, r)
}

// A relay alone claims solo; once a second relay runs beside it, both claim
// keyed (each sees the other's presence lock within a second or so, and a solo
// claim that finds the lease held turns keyed at once); when the second stops,
// the first goes back to solo.
func TestRelaysClaimSoloAloneAndKeyedTogether(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	trickled := make(chan struct{})
	// A steady trickle of events, stopped before the pool closes.
	defer func() { cancel(); <-trickled }()
	go func() {
		defer close(trickled)
		for i := 0; ctx.Err() == nil; i++ {
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				_, err := ob.EnqueueTx(ctx, tx, ev(fmt.Sprintf("k%d", i%5), i/5))
				return err
			})
			if err != nil && ctx.Err() == nil {
				t.Errorf("enqueue: %v", err)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	rec := newRecorder()
	r1 := newRelay(t, ob, db.Pool, rec)
	outbox.SetSoloPause(r1, 500*time.Millisecond)
	runRelays(t, r1)
	// since(r) counts r's solo and keyed batches from now on.
	since := func(r *outbox.Relay) func() (solo, keyed int64) {
		s0 := r.Stats()
		return func() (int64, int64) {
			s := r.Stats()
			return s.Solo - s0.Solo, (s.Batches - s.Solo) - (s0.Batches - s0.Solo)
		}
	}
	d := since(r1)
	coordtest.Until(t, 20*time.Second, 10*time.Millisecond, "relay 1, alone, claiming solo", func() bool { s, _ := d(); return s >= 5 })
	if _, k := d(); k != 0 {
		t.Fatalf("relay 1 alone made %d keyed batches", k)
	}
	r2, _ := ob.NewRelay(db.Pool, rec) // one recorder: it checks order across relays
	stop2 := runRelays(t, r2)
	time.Sleep(1500 * time.Millisecond) // both look around at least once
	d1, d2 := since(r1), since(r2)
	coordtest.Until(t, 20*time.Second, 10*time.Millisecond, "both relays claiming keyed", func() bool {
		_, k1 := d1()
		_, k2 := d2()
		return k1 >= 3 && k2 >= 3
	})
	if s1, _ := d1(); s1 > 0 {
		t.Fatalf("relay 1 made %d solo batches beside relay 2", s1)
	}
	stop2()
	time.Sleep(1500 * time.Millisecond) // relay 1 looks around, its solo pause over
	d = since(r1)
	coordtest.Until(t, 20*time.Second, 10*time.Millisecond, "relay 1, alone again, claiming solo", func() bool { s, _ := d(); return s >= 5 })
	rec.check(t)
}

// A relay on a pool of one connection (its LISTEN connection leaves the pool)
// drains a backlog that takes more than a second: its once-a-second look around
// must not wait for a second connection while the next batch's claim, which rode
// with a COMMIT, holds the only one.
func TestRelayOnAOneConnectionPoolDrainsABacklog(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 2, PollInterval: 20 * time.Millisecond})
	const events = 600
	var es []outbox.Event
	for n := range events {
		es = append(es, ev(fmt.Sprintf("k%d", n%3), n/3))
	}
	enqueue(t, db.Pool, ob, es...)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rec := newRecorder()
	rec.delay = 5 * time.Millisecond // 300 batches: about 2 s, past the first look around
	r := newRelay(t, ob, pool, rec)
	stop := runRelays(t, r)
	coordtest.Until(t, 60*time.Second, 20*time.Millisecond, "the backlog published on a one-connection pool", func() bool {
		return r.Stats().Published == events
	})
	stop()
	rec.check(t)
}

// countedTryLock is hookedTryLock with body run after a nextval of a sequence
// of its own (prefix_<random>), whose name it returns: lastValue of it counts the
// try-locks.
func countedTryLock(t *testing.T, ctx context.Context, db *coordtest.PostgresDB, prefix, body string) (hooked *pgxpool.Pool, tries string) {
	t.Helper()
	tries = newSequence(t, ctx, db, prefix)
	return hookedTryLock(t, ctx, db, fmt.Sprintf(`
			PERFORM nextval('%s');`, tries)+body), tries
}

// noEmptyBatches fails the test if r called rec, or counted a batch, for its
// empty claims.
func noEmptyBatches(t *testing.T, rec *recorder, r *outbox.Relay) {
	t.Helper()
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	if s := r.Stats(); calls != 0 || s.Batches != 0 {
		t.Fatalf("publisher called %d times, %d batches, for empty claims", calls, s.Batches)
	}
}
