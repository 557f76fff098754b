package outbox_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A relay facing held keys — the only pending row belongs to a key it cannot
// lock (held by "another relay": the try-lock answers false), no NOTIFY — makes
// an empty claim and then retries shortly, since the holder will let go, but
// backs off: the delays double up to the poll interval, so it does not spin; it
// never calls the publisher with nothing to publish.
func TestRelayFacingHeldKeysBacksOff(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	scans := fmt.Sprintf("idle_scans_%d", rand.Uint32())
	if _, err := db.Pool.Exec(ctx, `CREATE SEQUENCE `+scans); err != nil {
		t.Fatal(err)
	}
	hooked := hookedTryLock(t, ctx, db, fmt.Sprintf(`
			PERFORM nextval('%s');
			IF key = pg_catalog.hashtext('held') THEN
				RETURN false;
			END IF;`, scans))
	enqueue(t, db.Pool, ob, ev("held", 0))
	rec := newRecorder()
	r, err := ob.NewRelay(hooked, rec)
	if err != nil {
		t.Fatal(err)
	}
	outbox.ForceKeyed(r) // key locks: a solo relay takes none
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the relay's first locking scan", func() bool { return lastValue(t, db, scans) >= 1 })
	time.Sleep(time.Second)
	// Short retries after 2, 4, 8, … ms: about ten in the first second (and the
	// pass the listener's start wakes), then one per doubling.
	first := lastValue(t, db, scans)
	if first < 3 || first > 14 {
		t.Fatalf("%d locking scans in the first second facing a held key: want a few short retries (3 to 14), backing off", first)
	}
	time.Sleep(time.Second)
	if n := lastValue(t, db, scans) - first; n > 2 {
		t.Fatalf("%d more locking scans in the next second: the relay facing a held key spins", n)
	}
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	if s := r.Stats(); calls != 0 || s.Batches != 0 {
		t.Fatalf("publisher called %d times, %d batches, for empty claims", calls, s.Batches)
	}
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
	claims := fmt.Sprintf("idle_claims_%d", rand.Uint32())
	if _, err := db.Pool.Exec(ctx, `CREATE SEQUENCE `+claims); err != nil {
		t.Fatal(err)
	}
	hooked := hookedTryLock(t, ctx, db, fmt.Sprintf(`
			PERFORM nextval('%s');`, claims))
	rec := newRecorder()
	r, err := ob.NewRelay(hooked, rec)
	if err != nil {
		t.Fatal(err)
	}
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the relay's first claim", func() bool { return lastValue(t, db, claims) >= 1 })
	time.Sleep(500 * time.Millisecond)
	// The first pass and, at most, the pass the listener's start wakes.
	if n := lastValue(t, db, claims); n > 3 {
		t.Fatalf("%d claims in 0.5 s with a one-minute poll interval: the idle relay spins", n)
	}
	rec.mu.Lock()
	calls := rec.calls
	rec.mu.Unlock()
	if s := r.Stats(); calls != 0 || s.Batches != 0 {
		t.Fatalf("publisher called %d times, %d batches, for empty claims", calls, s.Batches)
	}
}
