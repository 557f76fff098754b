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
	in := newInbox(t, db.Pool, outbox.InboxConfig{Table: "inbox", MeterProvider: tm, Retention: time.Millisecond, PruneBatch: 3})
	ctx := context.Background()
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
	err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
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
		wg.Go(func() {
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
		})
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
	r := newRelay(t, ob, db.Pool, rec)
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

// An event id from the wire that PostgreSQL cannot store as text (a NUL byte,
// invalid UTF-8: a Kafka header is any bytes) is refused by the inbox as a typed
// ErrInvalidID before any statement, so the consumer gives the delivery up
// instead of retrying a database error forever (a poison message that would stop
// its partition).
func TestInboxRefusesEventIDsPostgresCannotStore(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	in := newInbox(t, db.Pool, outbox.InboxConfig{Table: "inbox"})
	c, err := outbox.NewConsumer(outbox.ConsumerConfig[string]{Name: "c", DB: db.Pool, Inbox: in, MaxDeliveries: 3,
		Backoff: coord.Backoff{Base: time.Millisecond, Cap: time.Millisecond},
		Handler: func(context.Context, pgx.Tx, string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"evt\x00nul", "evt\xffbad", "cut \xe2\x82"} {
		err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
			_, err := in.ProcessTx(ctx, tx, "c", id, func(context.Context, pgx.Tx) error { return nil })
			if !errors.Is(err, outbox.ErrInvalidID) {
				t.Errorf("ProcessTx(%q) = %v, want ErrInvalidID", id, err)
			}
			_, serr := tx.Exec(ctx, "SELECT 1") // tx is still usable: nothing was sent
			return serr
		})
		if err != nil {
			t.Errorf("id %q: the transaction is no longer usable: %v", id, err)
		}
		if v := c.Handle(ctx, "m", id, 1); v.Action != outbox.Drop || !errors.Is(v.Err, outbox.ErrInvalidID) {
			t.Errorf("Handle(id %q) = %v %v, want Drop with ErrInvalidID (a retry fails the same way forever)", id, v.Action, v.Err)
		}
	}
}

// The broker-neutral core: what each delivery's Verdict is, and that only the
// handler's failures — never the database's — give a message up.
func TestConsumerVerdicts(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	tm := newTestMeter()
	in := newInbox(t, db.Pool, outbox.InboxConfig{Table: "inbox", MeterProvider: tm})
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (msg text)`); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	handler := func(ctx context.Context, tx pgx.Tx, msg string) error {
		if msg == "poison" {
			return boom
		}
		_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, msg)
		return err
	}
	cfg := outbox.ConsumerConfig[string]{Name: "c", DB: db.Pool, Inbox: in, Handler: handler, MaxDeliveries: 3,
		Backoff: coord.Backoff{Base: time.Second, Cap: time.Second}, MeterProvider: tm}
	c, err := outbox.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := func() string { return outbox.NewID(time.Now()).String() }
	first, poison := id(), id()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	cases := []struct {
		name     string
		ctx      context.Context
		msg, id  string
		delivery int
		want     outbox.Action
		wantErr  error
	}{
		{"processed", ctx, "m1", first, 1, outbox.Ack, nil},
		{"duplicate", ctx, "m1", first, 2, outbox.Ack, nil},
		{"handler fails", ctx, "poison", poison, 1, outbox.Retry, boom},
		{"handler fails at MaxDeliveries", ctx, "poison", poison, 3, outbox.Drop, boom},
		{"no event id", ctx, "m2", "", 1, outbox.Drop, outbox.ErrMissingEventID},
		{"event id the inbox refuses", ctx, "m3", string(make([]byte, 300)), 1, outbox.Drop, outbox.ErrInvalidID},
		{"cancelled", cancelled, "m4", id(), 1, outbox.Retry, context.Canceled},
	}
	for _, tc := range cases {
		v := c.Handle(tc.ctx, tc.msg, tc.id, tc.delivery)
		if v.Action != tc.want || !errors.Is(v.Err, tc.wantErr) || (tc.wantErr == nil) != (v.Err == nil) {
			t.Errorf("%s: %v %v, want %v %v", tc.name, v.Action, v.Err, tc.want, tc.wantErr)
		}
		if v.Action == outbox.Retry && tc.ctx == ctx && (v.Delay < 0 || v.Delay >= time.Second) {
			t.Errorf("%s: delay %v outside the backoff [0, 1 s)", tc.name, v.Delay)
		}
	}
	if v := c.Handle(ctx, "poison", poison, 3); !errors.As(v.Err, new(*outbox.HandlerError)) {
		t.Fatalf("give-up reason %T, want *HandlerError", v.Err)
	}
	// The database failing (here: the inbox table is gone) retries, even on a
	// delivery past MaxDeliveries: an outage must not dead-letter messages.
	if _, err := db.Pool.Exec(ctx, `DROP TABLE inbox`); err != nil {
		t.Fatal(err)
	}
	if v := c.Handle(ctx, "m5", id(), 7); v.Action != outbox.Retry {
		t.Fatalf("database failure: %v %v, want retry", v.Action, v.Err)
	}
	if n := count(t, db.Pool, `SELECT count(*) FROM effects`); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
	for name, want := range map[string]float64{"coordkit.outbox.consumer.processed": 1, "coordkit.outbox.inbox.duplicates": 1,
		"coordkit.outbox.consumer.handler_failures": 3, "coordkit.outbox.consumer.dead_lettered": 4, "coordkit.outbox.consumer.redeliveries": 4} {
		if got := tm.sum(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if _, err := outbox.NewConsumer(outbox.ConsumerConfig[string]{Name: "bad name"}); !errors.Is(err, outbox.ErrInvalidConfig) {
		t.Fatalf("invalid config: %v", err)
	}
}
