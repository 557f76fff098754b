package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestInboxProcessesOnceAndRollsBackTogether(t *testing.T) {
	db := coordtest.Postgres(t)
	tm := newTestMeter()
	in, err := outbox.NewInbox(outbox.InboxConfig{Table: "inbox", MeterProvider: tm, Retention: time.Millisecond, PruneBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := in.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (id text)`); err != nil {
		t.Fatal(err)
	}
	effect := func(id string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, id)
			return err
		}
	}
	id := outbox.NewID(time.Now()).String()
	// A failing effect rolls back the inbox record too: the redelivery runs it.
	boom := errors.New("boom")
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := in.ProcessTx(ctx, tx, "billing", id, func(context.Context, pgx.Tx) error { return boom })
		return err
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	// Ten concurrent deliveries of one event: exactly one effect.
	var ran atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
				ok, err := in.ProcessTx(ctx, tx, "billing", id, effect(id))
				if ok {
					ran.Add(1)
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	coordtest.Wait(t, &wg, 60*time.Second, "the 10 concurrent ProcessTx")
	if ran.Load() != 1 || count(t, db.Pool, `SELECT count(*) FROM effects`) != 1 {
		t.Fatalf("ran %d times", ran.Load())
	}
	if d := tm.sum("coordkit.outbox.inbox.duplicates"); d != 9 {
		t.Fatalf("duplicates metric %v, want 9", d)
	}
	// Another consumer processes the same event independently.
	pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		ok, err := in.ProcessTx(ctx, tx, "shipping", id, effect(id))
		if !ok || err != nil {
			t.Fatalf("second consumer: %v %v", ok, err)
		}
		return err
	})
	if _, err := in.ProcessTx(ctx, nil, "bad consumer", id, nil); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("bad consumer name: %v", err)
	}
	for range 5 {
		pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := in.ProcessTx(ctx, tx, "c", outbox.NewID(time.Now()).String(), effect("x"))
			return err
		})
	}
	time.Sleep(5 * time.Millisecond)
	if n, err := in.Prune(ctx, db.Pool); err != nil || n != 7 {
		t.Fatalf("pruned %d, %v", n, err)
	}
}

func TestMetricsLagPublishedRetriesParkedOldest(t *testing.T) {
	tm := newTestMeter()
	db, ob := setup(t, outbox.Config{Table: "ob", MeterProvider: tm, MaxAttempts: 2, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 2 * time.Millisecond}})
	rec := newRecorder()
	rec.fail = func(m outbox.Message) error {
		if m.Key == "bad" {
			return errors.New("no")
		}
		return nil
	}
	enqueue(t, db.Pool, ob, ev("a", 0), ev("a", 1), ev("bad", 0))
	time.Sleep(1100 * time.Millisecond)
	r, _ := ob.NewRelay(db.Pool, rec)
	// the oldest-unpublished gauge sees the waiting events before the first batch
	ctx := context.Background()
	stop := runRelays(t, r)
	coordtest.Until(t, 10*time.Second, 20*time.Millisecond, "published and parked", func() bool {
		return tm.sum("coordkit.outbox.published") == 2 && tm.sum("coordkit.outbox.parked") == 1
	})
	stop()
	if got := tm.sum("coordkit.outbox.retries"); got != 1 {
		t.Fatalf("retries %v, want 1", got)
	}
	lags := tm.observations("coordkit.outbox.publish.lag")
	if len(lags) != 2 || lags[0] < 1 {
		t.Fatalf("lags %v, want 2 values ≥ 1 s", lags)
	}
	if got := tm.sum("coordkit.outbox.enqueue.rejected"); got != 0 {
		t.Fatalf("rejected %v", got)
	}
	pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "t", Key: "k", Type: "x", Payload: []byte{0xff}})
		return nil
	})
	if got := tm.sum("coordkit.outbox.enqueue.rejected"); got != 1 {
		t.Fatalf("rejected %v", got)
	}
	// gauge: nothing pending now (the parked event is in the dead-letter table)
	// The gauge was last observed either while "bad" was still pending (≥ 1 s old)
	// or after it was parked (nothing pending: 0).
	if g := tm.gauge(t, "coordkit.outbox.oldest_unpublished.age"); g != 0 && g < 1 {
		t.Fatalf("oldest age gauge %v", g)
	}
}
