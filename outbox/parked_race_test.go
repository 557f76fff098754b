package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestKeyParkedDuringTheLockingScanIsNotClaimed drives, in a fixed order, the one
// race in which the claim's own check of the dead-letter table matters: relay 1's
// keyed statement has read its window (the key not parked yet) and is about to
// try-lock the key's bucket, when relay 2 claims that key, fails it and parks its
// head. Relay 1 then locks the bucket; its claim, a fresh snapshot, must see the
// key parked and publish none of its later events (per-key order: nothing after
// a parked event until an operator decides).
//
// The order is forced inside PostgreSQL: relay 1's connections resolve
// pg_try_advisory_xact_lock to a function in the test's schema (search_path
// "<schema>, pg_catalog") that, for the raced key's bucket, first waits for an
// advisory lock the test holds. The test parks the key meanwhile (through relay 2) and then
// lets relay 1 go on.
func TestKeyParkedDuringTheLockingScanIsNotClaimed(t *testing.T) {
	const raced, other = "race-parked", "race-other"
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), MaxAttempts: 1, PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hooked, gate := gatedTryLock(t, ctx, db, raced, other)

	// In seq order: the other key first (relay 1 locks it before it reaches the
	// raced key), then the raced key's two events.
	enqueue(t, db.Pool, ob, ev(other, 0))
	enqueue(t, db.Pool, ob, ev(raced, 0), ev(raced, 1))

	rec1 := newRecorder()
	r1 := gate.runKeyed(ob, hooked, rec1)

	// Relay 2 claims the raced key (relay 1 holds the other), fails it and parks
	// its head; the follower is not an attempt of its own.
	rec2 := newRecorder()
	rec2.fail = func(m outbox.Message) error {
		if k, n := parse(m); k == raced && n > 0 {
			return outbox.ErrSkipped
		}
		return errors.New("broker refuses it")
	}
	r2 := newRelay(t, ob, db.Pool, rec2)
	stop2 := runRelays(t, r2)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "relay 2 to park the raced key", func() bool {
		return count(t, db.Pool, `SELECT count(*) FROM ob_parked WHERE aggregateid = $1`, raced) == 1
	})
	stop2()
	if s := r2.Stats(); s.Parked != 1 || s.Published != 0 {
		t.Fatalf("relay 2: %+v, want 1 parked, 0 published", s)
	}

	gate.open()
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "relay 1 to publish the other key", func() bool { return r1.Stats().Published >= 1 })
	if n := rec1.published(raced); n != -1 {
		t.Fatalf("relay 1 published event %d of a key parked before its claim: it must wait for an operator", n)
	}
	rec1.check(t)
	if n := count(t, db.Pool, `SELECT count(*) FROM ob WHERE aggregateid = $1 AND published_at IS NULL`, raced); n != 1 {
		t.Fatalf("%d events of the parked key pending, want its follower", n)
	}
}

// firstTryLockFails returns a pool whose first try of the bucket lock of key
// fails, as if another relay held it for that instant (later tries are real),
// and the sequence whose last_value counts the tries of key's bucket: the
// test's proof that the race happened. (Buckets: hashtext(key) & 63, see
// outbox's claim.go; the test's other keys must not share key's one:
// distinctBuckets.)
func firstTryLockFails(t *testing.T, ctx context.Context, db *coordtest.PostgresDB, key string, others ...string) (hooked *pgxpool.Pool, calls string) {
	t.Helper()
	distinctBuckets(t, db, append([]string{key}, others...)...)
	calls = newSequence(t, ctx, db, "try_calls")
	return hookedTryLock(t, ctx, db, fmt.Sprintf(`
			IF key = (pg_catalog.hashtext('%s') & 63) AND nextval('%s') = 1 THEN
				RETURN false;
			END IF;`, key, calls)), calls
}

// gatedTryLock returns a pool whose relays, trying the bucket lock of key,
// wait there until the gate opens: the hook takes, shared, a lock the gate's
// connection holds. The gate opens when the test ends, if not before. The test's
// other keys must not share key's bucket (distinctBuckets).
func gatedTryLock(t *testing.T, ctx context.Context, db *coordtest.PostgresDB, key string, others ...string) (*pgxpool.Pool, *tryLockGate) {
	t.Helper()
	distinctBuckets(t, db, append([]string{key}, others...)...)
	hook := rand.Int32()
	hooked := hookedTryLock(t, ctx, db, fmt.Sprintf(`
			IF key = (pg_catalog.hashtext('%s') & 63) THEN
				PERFORM pg_catalog.pg_advisory_xact_lock_shared(%d, 1);
			END IF;`, key, hook))
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, 1)", hook); err != nil {
		conn.Release()
		t.Fatal(err)
	}
	g := &tryLockGate{t: t, ctx: ctx, db: db, conn: conn, hook: hook}
	t.Cleanup(g.open)
	return hooked, g
}

// tryLockGate holds the relays of a gatedTryLock pool at the gated key.
type tryLockGate struct {
	t      *testing.T
	ctx    context.Context
	db     *coordtest.PostgresDB
	conn   *pgxpool.Conn
	hook   int32
	opened sync.Once
}

// waitForAWaiter waits (20 s at most) until a backend waits on the gate.
func (g *tryLockGate) waitForAWaiter(what string) {
	g.t.Helper()
	pid := g.conn.Conn().PgConn().PID()
	coordtest.Until(g.t, 20*time.Second, 20*time.Millisecond, what, func() bool {
		return count(g.t, g.db.Pool, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, pid) > 0
	})
}

// runKeyed runs relay 1 of the race: ob's relay over the gated pool hooked,
// keyed (the race is in the keyed claim), and waits until its locking scan waits
// at the gate.
func (g *tryLockGate) runKeyed(ob *outbox.Outbox, hooked *pgxpool.Pool, pub outbox.Publisher) *outbox.Relay {
	g.t.Helper()
	r := newRelay(g.t, ob, hooked, pub)
	outbox.ForceKeyed(r)
	runRelays(g.t, r)
	g.waitForAWaiter("relay 1's locking scan to wait at the raced key")
	return r
}

// open lets the waiting relays go on; later calls do nothing.
func (g *tryLockGate) open() {
	g.opened.Do(func() {
		if _, err := g.conn.Exec(context.WithoutCancel(g.ctx), "SELECT pg_advisory_unlock($1, 1)", g.hook); err != nil {
			g.t.Errorf("open the gate: %v", err)
		}
		g.conn.Release()
	})
}

// hookedTryLock creates, in db's schema, a pg_try_advisory_xact_lock(cls, key)
// that runs body (PL/pgSQL statements; it may RETURN) before deferring to
// pg_catalog's, and returns a pool whose connections resolve the relay's
// unqualified calls to it (search_path "<schema>, pg_catalog"), closed when the
// test ends.
func hookedTryLock(t *testing.T, ctx context.Context, db *coordtest.PostgresDB, body string) *pgxpool.Pool {
	t.Helper()
	if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION pg_try_advisory_xact_lock(cls int4, key int4) RETURNS bool
		LANGUAGE plpgsql AS $$
		BEGIN`+body+`
			RETURN pg_catalog.pg_try_advisory_xact_lock(cls, key);
		END $$`); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = db.Schema + ", pg_catalog"
	hooked, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hooked.Close)
	return hooked
}

// distinctBuckets fails the test when two of keys share a bucket of the keyed
// relays (hashtext(key) & 63): a race forced at one key's bucket would then
// also hold the other.
func distinctBuckets(t *testing.T, db *coordtest.PostgresDB, keys ...string) {
	t.Helper()
	if n := count(t, db.Pool, `SELECT count(DISTINCT hashtext(k) & 63) FROM unnest($1::text[]) k`, keys); n != len(keys) {
		t.Fatalf("keys %q share a bucket: rename one", keys)
	}
}

// TestKeySkippedAtItsHeadIsClaimedFromItsHead: a keyed relay meets a key's head
// while another relay holds the key's bucket (the try-lock fails: the batch
// passes the bucket over and claims another key), then locks the bucket in its
// next batch, after the other relay let go without publishing (its batch rolled
// back). The claim must read that key from its head, or it publishes event 1
// before event 0.
//
// The failed try-lock is forced inside PostgreSQL: the relay's connections
// resolve pg_try_advisory_xact_lock to a function in the test's schema (search
// path "<schema>, pg_catalog") that answers false to the first call for the raced
// key's bucket, as if another relay held it, and defers to pg_catalog after that.
func TestKeySkippedAtItsHeadIsClaimedFromItsHead(t *testing.T) {
	const raced, other = "race-skipped", "race-other"
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), PollInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	hooked, calls := firstTryLockFails(t, ctx, db, raced, other)

	// In seq order: the raced key's head, the other key, the raced key's next.
	enqueue(t, db.Pool, ob, ev(raced, 0))
	enqueue(t, db.Pool, ob, ev(other, 0))
	enqueue(t, db.Pool, ob, ev(raced, 1))

	rec := newRecorder()
	r := newRelay(t, ob, hooked, rec)
	outbox.ForceKeyed(r) // the race is in the keyed claim
	runRelays(t, r)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the relay to publish all three events", func() bool {
		return rec.published(raced) == 1 && rec.published(other) == 0
	})
	rec.check(t)
	if n := lastValue(t, db, calls); n < 2 {
		t.Fatalf("the raced key was try-locked %d times: the race did not happen", n)
	}
}
