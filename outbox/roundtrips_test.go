package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRoundTripsOfARelayBatch holds the round trips of the relay, counted on the
// wire (coordtest.RoundTrips): with work waiting, a batch is one — its marks and
// COMMIT, with the next batch's BEGIN, relay lease and claim riding along —,
// solo or keyed; the first claim is one more, and the claim that finds nothing
// one more (its ROLLBACK); EnqueueTx is one statement of the caller's
// transaction. A change that adds a round trip fails here.
func TestRoundTripsOfARelayBatch(t *testing.T) {
	for _, mode := range []string{"solo", "keyed"} {
		t.Run(mode, func(t *testing.T) {
			db := coordtest.Postgres(t)
			ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), BatchSize: 10, PollInterval: time.Minute})
			pool, rt := db.CountingPool(t, 4)
			rec := newRecorder()
			r := newRelay(t, ob, pool, rec)
			if mode == "keyed" {
				outbox.ForceKeyed(r)
			}
			runRelays(t, r)
			settled(t, rt)

			// 5 full batches in one transaction (one NOTIFY), then an empty claim.
			const batches = 5
			var es []outbox.Event
			for n := range 10 * batches {
				es = append(es, ev(fmt.Sprintf("k%d", n%7), n/7))
			}
			before := rt.Count() // before the NOTIFY: the relay may claim at once
			enqueue(t, db.Pool, ob, es...)
			coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "all published", func() bool { return r.Stats().Published == 10*batches })
			settled(t, rt)
			got := rt.Count() - before
			// The first claim, one round trip per batch (the last one's claim finds
			// nothing), its ROLLBACK; the relay reads its oldest-pending gauge at
			// most once a second after a batch: one more, at most.
			t.Logf("%s: %d round trips for %d batches (%d claims published) and the empty claim that ends them", mode, got, batches, r.Stats().Batches)
			if s := r.Stats(); s.Batches != batches {
				t.Fatalf("%d batches, want %d", s.Batches, batches)
			}
			if got < batches+2 || got > batches+3 {
				t.Fatalf("%d round trips for %d batches and an empty claim: want %d (+1 for the gauge)", got, batches, batches+2)
			}
			rec.check(t)
		})
	}

	// EnqueueTx is one round trip inside the caller's transaction.
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db)})
	pool, rt := db.CountingPool(t, 1)
	ctx := context.Background()
	enqueueOne := func() error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := ob.EnqueueTx(ctx, tx, ev("e", 0))
			return err
		})
	}
	for range 3 {
		if err := enqueueOne(); err != nil {
			t.Fatal(err)
		}
	}
	n, err := rt.Of(10, enqueueOne)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("BEGIN; EnqueueTx; COMMIT: %.1f round trips, want 3", n)
	}
}

// settled waits until the counted connections have made no round trip for 300 ms.
func settled(t *testing.T, rt *coordtest.RoundTrips) {
	t.Helper()
	last, since := rt.Count(), time.Now()
	coordtest.Until(t, 20*time.Second, 10*time.Millisecond, "the relay to go idle", func() bool {
		if c := rt.Count(); c != last {
			last, since = c, time.Now()
		}
		return time.Since(since) > 300*time.Millisecond
	})
}
