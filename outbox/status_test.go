package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestStatusAndLockParked parks one key's head, publishes another key, and reads
// the operator's view: backlog, lag, the parked key with its blocked follower;
// then LockParkedTx returns the parked event, holds its row against a concurrent
// Requeue, and reports ErrNotParked once it is requeued.
func TestStatusAndLockParked(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob", MaxAttempts: 1, PollInterval: 20 * time.Millisecond,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	empty, err := ob.Status(ctx, db.Pool)
	if err != nil || empty.Pending != 0 || empty.Parked != 0 || empty.OldestPendingAge != 0 || len(empty.ParkedKeys) != 0 {
		t.Fatalf("empty Status = %+v, %v", empty, err)
	}
	ids := enqueue(t, db.Pool, ob, ev("poison", 0), ev("poison", 1), ev("good", 0))
	pending, err := ob.Status(ctx, db.Pool)
	if err != nil || pending.Pending != 3 || pending.OldestPendingAge <= 0 {
		t.Fatalf("Status before the relay = %+v, %v", pending, err)
	}

	pub := newCountingPublisher(map[string]error{"poison": errors.New("broker refused")})
	r := newRelay(t, ob, db.Pool, pub)
	stop := runRelays(t, r)
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "the poison head parked and good published", func() bool {
		once, _ := pub.published(ids[2:])
		return r.Stats().Parked == 1 && once == 1 &&
			count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NOT NULL`) == 1
	})
	stop()

	s, err := ob.Status(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending != 1 || s.Parked != 1 || s.PublishedInWindow != 1 || s.PublishLagP99 <= 0 || s.OldestPendingAge <= 0 {
		t.Fatalf("Status = %+v", s)
	}
	if len(s.ParkedKeys) != 1 || s.ParkedKeys[0].Key != "poison" || s.ParkedKeys[0].Parked != 1 || s.ParkedKeys[0].Blocked != 1 || s.ParkedKeys[0].ParkedAt.IsZero() {
		t.Fatalf("ParkedKeys = %+v", s.ParkedKeys)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	p, err := ob.LockParkedTx(ctx, tx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if p.ID != ids[0] || p.Key != "poison" || p.Attempts != 1 || p.LastError != "broker refused" {
		t.Fatalf("LockParkedTx = %+v", p)
	}
	// A Requeue from another connection waits for the lock.
	requeued := make(chan error, 1)
	go func() { requeued <- ob.Requeue(ctx, db.Pool, ids[0]) }()
	select {
	case err := <-requeued:
		t.Fatalf("Requeue returned %v while LockParkedTx held the row", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := ob.Discard(ctx, tx, ids[0]); err != nil {
		t.Fatalf("Discard in the locking tx: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-requeued:
		if !errors.Is(err, outbox.ErrNotParked) {
			t.Fatalf("the raced Requeue = %v, want ErrNotParked", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the raced Requeue never returned")
	}
	err = pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		_, err := ob.LockParkedTx(ctx, tx, ids[0])
		return err
	})
	if !errors.Is(err, outbox.ErrNotParked) {
		t.Fatalf("LockParkedTx of a discarded event = %v, want ErrNotParked", err)
	}
}
