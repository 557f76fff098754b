package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

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

	distinctBuckets(t, db, raced, other)
	hooked, calls := firstTryLockFails(t, ctx, db, raced)

	// In seq order: the raced key's head, the other key, the raced key's next.
	enqueue(t, db.Pool, ob, ev(raced, 0))
	enqueue(t, db.Pool, ob, ev(other, 0))
	enqueue(t, db.Pool, ob, ev(raced, 1))

	rec := newRecorder()
	r, err := ob.NewRelay(hooked, rec)
	if err != nil {
		t.Fatal(err)
	}
	outbox.ForceKeyed(r) // the race is in the keyed claim
	runRelays(t, r)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the relay to publish all three events", func() bool {
		return rec.published(raced) == 1 && rec.published(other) == 0
	})
	rec.check(t)
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT last_value FROM `+calls).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("the raced key was try-locked %d times: the race did not happen", n)
	}
}
