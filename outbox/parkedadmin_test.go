package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
)

// parkEvery moves every pending row of the outbox ob into its dead-letter
// table as the relay parks a poison event (attempts + 1, the error text), the
// error of key k being errOf(k).
func parkEvery(t *testing.T, ctx context.Context, db pgx.Tx, errOf string) {
	t.Helper()
	if _, err := db.Exec(ctx, `WITH m AS (DELETE FROM ob WHERE published_at IS NULL RETURNING *)
INSERT INTO ob_parked (id, seq, aggregatetype, aggregateid, type, payload, payload_json, headers, created_at, attempts, last_error)
SELECT id, seq, aggregatetype, aggregateid, type, payload, payload_json, headers, created_at, attempts + 1,
  replace($1, '{key}', aggregateid) FROM m`, errOf); err != nil {
		t.Fatal(err)
	}
}

// TestParkedListPagesFiltersAndActsInBulk: ParkedList pages through 250
// parked events in outbox order, each once; filters by key and topic; searches
// by key prefix and error text; ParkedCount agrees; ParkedGet and the single
// verbs report ErrNotFound; ParkedLockAllTx locks what is still parked, and
// ParkedRequeueTx / ParkedDiscardTx act on many at once, skipping what is gone.
func TestParkedListPagesFiltersAndActsInBulk(t *testing.T) {
	db, ob := setup(t, outbox.Config{Table: "ob"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var es []outbox.Event
	for i := range 250 {
		e := ev(fmt.Sprintf("key-%03d", i/2), i%2)
		if i%5 == 0 {
			e.Topic = "invoices"
		}
		e.Payload = []byte(strings.Repeat("x", 3000))
		es = append(es, e)
	}
	ids := enqueue(t, db.Pool, ob, es...)
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		parkEvery(t, ctx, tx, "broker: message of {key} TOO large")
		_, err := tx.Exec(ctx, `UPDATE ob_parked SET last_error = 'schema registry: unknown subject' WHERE aggregateid = 'key-007'`)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	var seen []outbox.ID
	opts := &outbox.ParkedListOpts{Limit: 100, MaxPayload: 16}
	for {
		res, err := ob.ParkedList(ctx, db.Pool, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range res.Events {
			if len(p.Payload) != 16 || p.PayloadBytes != 3000 {
				t.Fatalf("event %s: payload of %d bytes (of %d): want the first 16 of 3000", p.ID, len(p.Payload), p.PayloadBytes)
			}
			seen = append(seen, p.ID)
		}
		if res.Next == "" {
			break
		}
		opts.After = res.Next
	}
	if len(seen) != 250 || seen[0] != ids[0] || seen[249] != ids[249] {
		t.Fatalf("ParkedList pages: %d events, first %s, last %s: want all 250 in outbox order", len(seen), seen[0], seen[len(seen)-1])
	}
	for _, c := range []struct {
		opts outbox.ParkedListOpts
		want int64
	}{
		{outbox.ParkedListOpts{}, 250},
		{outbox.ParkedListOpts{Key: "key-007"}, 2},
		{outbox.ParkedListOpts{Topic: "invoices"}, 50},
		{outbox.ParkedListOpts{Search: "key-01"}, 20},
		{outbox.ParkedListOpts{Search: "too LARGE"}, 248},
		{outbox.ParkedListOpts{Search: "Schema Registry", Type: "test.event"}, 2},
		{outbox.ParkedListOpts{Search: "nothing like it"}, 0},
	} {
		n, err := ob.ParkedCount(ctx, db.Pool, &c.opts)
		res, lerr := ob.ParkedList(ctx, db.Pool, &outbox.ParkedListOpts{Key: c.opts.Key, Topic: c.opts.Topic, Type: c.opts.Type, Search: c.opts.Search, Limit: 1000})
		if err != nil || lerr != nil || n != c.want || int64(len(res.Events)) != c.want {
			t.Fatalf("ParkedCount(%+v) = %d, %v; ParkedList found %d, %v; want %d", c.opts, n, err, len(res.Events), lerr, c.want)
		}
	}
	for _, bad := range []*outbox.ParkedListOpts{{Limit: -1}, {Limit: outbox.MaxParkedListLimit + 1}, {After: "!"}, {MaxPayload: -1}} {
		if _, err := ob.ParkedList(ctx, db.Pool, bad); !errors.Is(err, outbox.ErrInvalidConfig) {
			t.Errorf("ParkedList(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}

	got, err := ob.ParkedGet(ctx, db.Pool, ids[3])
	if err != nil || got.Key != "key-001" || string(got.Payload) != strings.Repeat("x", 3000) || got.Attempts != 1 {
		t.Fatalf("ParkedGet = %+v, %v", got.Key, err)
	}
	gone := outbox.NewID(time.Now())
	for name, err := range map[string]error{
		"ParkedGet":     func() error { _, err := ob.ParkedGet(ctx, db.Pool, gone); return err }(),
		"ParkedRequeue": ob.ParkedRequeue(ctx, db.Pool, gone),
		"ParkedDiscard": ob.ParkedDiscard(ctx, db.Pool, gone),
	} {
		if !errors.Is(err, outbox.ErrNotFound) || !errors.Is(err, outbox.ErrNotParked) {
			t.Errorf("%s of an event that is not parked = %v, want ErrNotFound", name, err)
		}
	}

	// Bulk: lock 200 (one of them discarded first, one not parked at all), requeue 100, discard the rest.
	if err := ob.ParkedDiscard(ctx, db.Pool, ids[0]); err != nil {
		t.Fatal(err)
	}
	batch := append(append([]outbox.ID{}, ids[:200]...), gone)
	if err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		locked, err := ob.ParkedLockAllTx(ctx, tx, batch)
		if err != nil || len(locked) != 199 || locked[0].ID != ids[1] {
			return fmt.Errorf("ParkedLockAllTx = %d events, %v: want the 199 still parked, in outbox order", len(locked), err)
		}
		n, err := ob.ParkedRequeueTx(ctx, tx, batch[:101])
		if err != nil || n != 100 {
			return fmt.Errorf("ParkedRequeueTx = %d, %v: want 100 (one was discarded before)", n, err)
		}
		n, err = ob.ParkedDiscardTx(ctx, tx, batch)
		if err != nil || n != 99 {
			return fmt.Errorf("ParkedDiscardTx = %d, %v: want the 99 still parked", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if p, q := count(t, db.Pool, `SELECT count(*) FROM ob_parked`), count(t, db.Pool, `SELECT count(*) FROM ob WHERE published_at IS NULL AND attempts = 0`); p != 50 || q != 100 {
		t.Fatalf("after the bulk: %d parked (want 50), %d requeued pending (want 100)", p, q)
	}
}
