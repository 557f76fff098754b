package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// ownChannel is a NOTIFY channel no other test uses. Channels are per database,
// not per schema: with the default (Table + "_ready"), every other test's outbox
// named "ob" on the shared server wakes this test's relay too.
func ownChannel(db *coordtest.PostgresDB) string { return db.Schema + "_ready" }

// NOTIFY from EnqueueTx wakes the relay: with a one-minute poll, an event is
// still published at once.
func TestRelayWakesOnNotify(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), PollInterval: time.Minute})
	rec := newRecorder()
	r := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r)
	time.Sleep(500 * time.Millisecond) // listener up, first pass done
	enqueue(t, db.Pool, ob, ev("a", 0), ev("a", 1))
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "published via NOTIFY", func() bool { return rec.published("a") == 1 })
	if w := r.Stats().Wakeups; w < 1 {
		t.Fatalf("wakeups = %d, want ≥ 1", w)
	}
	rec.check(t)
}

// With NOTIFY disabled (as behind a transaction pooler), polling publishes.
func TestRelayPollingFallback(t *testing.T) {
	db := coordtest.Postgres(t)
	ob := newOutbox(t, db.Pool, outbox.Config{Table: "ob", Channel: ownChannel(db), DisableNotify: true, PollInterval: 50 * time.Millisecond})
	rec := newRecorder()
	r := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r)
	enqueue(t, db.Pool, ob, ev("a", 0))
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "published by polling", func() bool { return rec.published("a") == 0 })
	if w := r.Stats().Wakeups; w != 0 {
		t.Fatalf("wakeups = %d with NOTIFY disabled", w)
	}
}

// A publisher that fails forever for one key parks that key's head after
// MaxAttempts; every other key keeps flowing; the parked key's followers wait
// until an operator requeues (then order resumes) or discards.
func TestPoisonKeyParksOnlyItsKey(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: 3, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 10 * time.Millisecond}})
	rec := newRecorder()
	var broken sync.Map
	broken.Store("poison", true)
	rec.fail = func(m outbox.Message) error {
		if _, ok := broken.Load(m.Key); ok {
			return errors.New("broker rejects this key")
		}
		return nil
	}
	r1 := newRelay(t, ob, db.Pool, rec)
	r2 := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r1, r2)
	var es []outbox.Event
	for n := range 20 {
		es = append(es, ev("poison", n), ev("good", n), ev(fmt.Sprintf("other%d", n%3), n/3))
	}
	enqueue(t, db.Pool, ob, es...)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "good key flows", func() bool { return rec.published("good") == 19 && rec.published("other2") == 5 })
	ctx := context.Background()
	var parked []outbox.ParkedEvent
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "poison parked", func() bool {
		parked, _ = ob.Parked(ctx, db.Pool, 10)
		return len(parked) == 1
	})
	if k, n := parse(outbox.Message{Payload: parked[0].Payload}); k != "poison" || n != 0 || parked[0].Attempts != 3 || parked[0].LastError == "" {
		t.Fatalf("parked %+v", parked[0])
	}
	// The relay counts a park after its batch committed: the row can be read an
	// instant before the count moves (read at once, 0 in a loaded run).
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the park counted", func() bool { return r1.Stats().Parked+r2.Stats().Parked >= 1 })
	time.Sleep(200 * time.Millisecond)
	if got := r1.Stats().Parked + r2.Stats().Parked; got != 1 {
		t.Fatalf("parked count %d, want 1", got)
	}
	if p := rec.published("poison"); p != -1 {
		t.Fatalf("poison key published up to %d while its head is parked", p)
	}
	if err := ob.Discard(ctx, db.Pool, outbox.NewID(time.Now())); !errors.Is(err, outbox.ErrNotParked) {
		t.Fatalf("discard of unknown id: %v", err)
	}
	// Fix the broker, requeue: the head goes first, then the rest, in order.
	broken.Delete("poison")
	if err := ob.Requeue(ctx, db.Pool, parked[0].ID); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "poison key drains after requeue", func() bool { return rec.published("poison") == 19 })
	rec.check(t)

	// Discard: break a key again, let it park, discard the head; the followers flow.
	broken.Store("bad2", true)
	enqueue(t, db.Pool, ob, ev("bad2", 0), ev("bad2", 1))
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "bad2 parked", func() bool { p, _ := ob.Parked(ctx, db.Pool, 10); parked = p; return len(p) == 1 })
	broken.Delete("bad2")
	rec.mu.Lock()
	rec.done["bad2"] = 0 // event 0 is discarded on purpose: 1 may follow
	rec.mu.Unlock()
	if err := ob.Discard(ctx, db.Pool, parked[0].ID); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "bad2 follower flows after discard", func() bool { return rec.published("bad2") == 1 })
	rec.check(t)
}

// Cancelling Run while a batch is being published finishes that batch: every
// event the publisher saw is marked, and nothing is lost.
func TestGracefulShutdownFinishesBatch(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", BatchSize: 50})
	rec := newRecorder()
	rec.delay = 300 * time.Millisecond
	r := newRelay(t, ob, db.Pool, rec)
	enqueue(t, db.Pool, ob, evs("k", 120)...)
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "a batch in flight", func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.calls > 0 })
	stop()
	published := rec.published("k") + 1
	marked := count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NOT NULL`)
	if published == 0 || marked != published {
		t.Fatalf("publisher saw %d, marked %d", published, marked)
	}
	r2 := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r2)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "rest published", func() bool { return rec.published("k") == 119 })
	rec.check(t)
	t.Logf("published before shutdown: %d, all marked", published)
}

func TestPruneInBoundedBatches(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", Retention: time.Millisecond, PruneBatch: 7, PruneInterval: time.Hour})
	rec := newRecorder()
	r := newRelay(t, ob, db.Pool, rec)
	enqueue(t, db.Pool, ob, evs("k", 30)...)
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "published", func() bool { return rec.published("k") == 29 })
	stop()
	time.Sleep(5 * time.Millisecond)
	// The relay's first prune is an hour away: all 30 go now, in statements of
	// at most 7 rows.
	left := count(t, db.Pool, `SELECT count(*) FROM ob`)
	n, err := ob.Prune(context.Background(), db.Pool)
	if err != nil || int(n) != left || left != 30 {
		t.Fatalf("pruned %d of %d, %v", n, left, err)
	}
	if c := count(t, db.Pool, `SELECT count(*) FROM ob`); c != 0 {
		t.Fatalf("%d rows left", c)
	}
}

// A key waiting for a retry with a backlog longer than the claim's window
// (4×BatchSize pending rows ahead of everything else) must not stall other keys:
// the claim reads only the rows of the keys this relay locked.
func TestRetryBacklogDoesNotStallOtherKeys(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", BatchSize: 2, MaxAttempts: 100, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Hour, Cap: time.Hour, Rand: func(c int64) int64 { return c }}})
	rec := newRecorder()
	rec.fail = func(m outbox.Message) error {
		if m.Key == "slow" {
			return errors.New("broker rejects this key")
		}
		return nil
	}
	enqueue(t, db.Pool, ob, evs("slow", 20)...)
	enqueue(t, db.Pool, ob, ev("good", 0), ev("good", 1))
	r := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the slow key's head to fail once", func() bool { return r.Stats().Failures >= 1 })
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "good key flows while slow waits for its retry", func() bool { return rec.published("good") == 1 })
	rec.check(t)
}

// allFail is a Publisher that fails every message of a key with a real error
// (as a broker does when a whole partition fails), not with ErrSkipped.
type allFail struct{ key string }

func (p allFail) Publish(_ context.Context, msgs []outbox.Message) []error {
	errs := make([]error, len(msgs))
	failed := false
	for i, m := range msgs {
		if m.Key == p.key {
			errs[i], failed = errors.New("partition unavailable"), true
		}
	}
	if !failed {
		return nil
	}
	return errs
}

// Only the head of a failing key is attempted and parked: its followers, which
// failed only because the key's earlier event did, keep their attempts and stay
// in the outbox behind the parked head (so requeueing the head resumes the key).
func TestOnlyTheHeadOfAFailingKeyParks(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: 2, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond}})
	enqueue(t, db.Pool, ob, ev("bad", 0), ev("bad", 1), ev("bad", 2))
	r := newRelay(t, ob, db.Pool, allFail{key: "bad"})
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "the head parked", func() bool { return r.Stats().Parked >= 1 })
	stop()
	if got := r.Stats().Parked; got != 1 {
		t.Fatalf("parked %d events, want only the head", got)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL AND attempts = 0`); n != 2 {
		t.Fatalf("%d followers pending with no attempts, want 2", n)
	}
}

// The per-key enqueue lock must not depend on how the table is spelled: a
// service configured with "ob" and one with Schema "<schema>" and "ob" write the same table,
// so their enqueues of one key must serialize (or rows of a key could commit out
// of seq order and be published out of order).
func TestEnqueueLockIgnoresTheSchemaSpelling(t *testing.T) {
	db, plain := setup(t, outbox.Config{Table: "ob"})
	qualified := newOutbox(t, db.Pool, outbox.Config{Schema: db.Schema, Table: "ob"})
	ctx := context.Background()
	tx1, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	if _, err := plain.EnqueueTx(ctx, tx1, ev("k", 0)); err != nil {
		t.Fatal(err)
	}
	tx2, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(ctx)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := qualified.EnqueueTx(wctx, tx2, ev("k", 1)); err == nil {
		t.Fatal("the second enqueue of key k did not wait for the first transaction")
	}
}

// When Publish runs out of time, the messages PublisherFunc never tried are not
// attempts: with MaxAttempts 1 only the message that was being sent parks, the
// others are published on the next batch.
func TestUnattemptedMessagesAreNotAttempts(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: 1, PublishTimeout: 200 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	enqueue(t, db.Pool, ob, ev("slow", 0), ev("a", 0), ev("b", 0))
	var mu sync.Mutex
	published := map[string]bool{}
	pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		if m.Key == "slow" {
			<-ctx.Done() // the broker hangs on this one until the publish timeout
			return ctx.Err()
		}
		mu.Lock()
		published[m.Key] = true
		mu.Unlock()
		return nil
	})
	r := newRelay(t, ob, db.Pool, pub)
	runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "a and b published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return published["a"] && published["b"]
	})
	if got := r.Stats().Parked; got != 1 {
		t.Fatalf("parked %d events, want 1 (the one that hung)", got)
	}
}

// A relay whose batches fail on the database (here: its table renamed away)
// keeps running, backs off with a growing streak (0, 1, 2, …, so the backoff
// grows), counts each failure in Stats().DBErrors, and publishes once the table
// is back.
func TestRelayRetriesDatabaseErrorsWithGrowingBackoff(t *testing.T) {
	log := &logged{}
	const failed = "outbox relay: batch failed, retrying"
	db, ob := setup(t, outbox.Config{Table: "ob_dberr", PollInterval: 20 * time.Millisecond, Logger: slog.New(log),
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_dberr RENAME TO ob_dberr_away`); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	r := newRelay(t, ob, db.Pool, rec)
	runRelays(t, r)
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "three failed batches", func() bool { return len(log.with(failed, "streak")) >= 3 })
	if _, err := db.Pool.Exec(ctx, `ALTER TABLE ob_dberr_away RENAME TO ob_dberr`); err != nil {
		t.Fatal(err)
	}
	enqueue(t, db.Pool, ob, ev("k", 1))
	coordtest.Until(t, 30*time.Second, 20*time.Millisecond, "the event published after the table came back", func() bool { return rec.published("k") == 1 })
	got := log.with(failed, "streak")
	for i := range 3 {
		if got[i].Int64() != int64(i) {
			t.Fatalf("streaks of the failed batches %v, want 0, 1, 2, …", got)
		}
	}
	if st := r.Stats(); st.DBErrors < 3 {
		t.Fatalf("Stats().DBErrors = %d after %d logged failures, want ≥ 3", st.DBErrors, len(got))
	}
}
