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

// The broker-neutral core: what each delivery's Verdict is, and that only the
// handler's failures — never the database's — give a message up.
func TestConsumerVerdicts(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	tm := newTestMeter()
	in, _ := outbox.NewInbox(outbox.InboxConfig{Table: "inbox", MeterProvider: tm})
	if err := in.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
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
