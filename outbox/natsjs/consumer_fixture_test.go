package natsjs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// consumerFixture: a stream, an outbox with a relay publishing into it, an inbox
// and an effects table (one row per applied event: a double effect would fail
// its primary key, and the handler, loudly).
type consumerFixture struct {
	t      *testing.T
	js     jetstream.JetStream
	stream string
	prefix string
	db     *coordtest.PostgresDB
	ob     *outbox.Outbox
	in     *outbox.Inbox
	tm     *countingMeter // the inbox's and the consumers' metrics
}

func newConsumerFixture(t *testing.T, dupWindow time.Duration) *consumerFixture {
	_, js, stream, prefix := jetStream(t, dupWindow)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	tm := newCountingMeter()
	ob, in := outboxAndInbox(t, db.Pool, outbox.Config{Table: "ob", PollInterval: 20 * time.Millisecond}, outbox.InboxConfig{Table: "inbox", MeterProvider: tm})
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (event_id text PRIMARY KEY, key text NOT NULL, n int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &consumerFixture{t: t, js: js, stream: stream, prefix: prefix, db: db, ob: ob, in: in, tm: tm}
}

func (f *consumerFixture) publisher() *natsjs.Publisher {
	return newPublisher(f.t, f.js, natsjs.Config{Subject: func(m outbox.Message) string { return f.prefix + "." + m.Topic }})
}

// relay runs a relay until the test ends.
func (f *consumerFixture) relay() {
	r, err := f.ob.NewRelay(f.db.Pool, f.publisher())
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	f.t.Cleanup(func() { cancel(); <-done })
}

// enqueue commits events "key:n" for n in [from, to) of each key; it returns their ids.
func (f *consumerFixture) enqueue(keys []string, from, to int) []string {
	var ids []string
	err := pgx.BeginFunc(context.Background(), f.db.Pool, func(tx pgx.Tx) error {
		for n := from; n < to; n++ {
			for _, k := range keys {
				id, err := f.ob.EnqueueTx(context.Background(), tx, outbox.Event{Topic: "orders", Key: k, Type: "order.updated", Payload: fmt.Appendf(nil, "%s:%d", k, n)})
				if err != nil {
					return err
				}
				ids = append(ids, id.String())
			}
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return ids
}

// effect is a Handler that applies "key:n" once per event and fails when fail says so.
func (f *consumerFixture) effect(fail func(msg jetstream.Msg) error) func(context.Context, pgx.Tx, jetstream.Msg) error {
	return func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
		if fail != nil {
			if err := fail(msg); err != nil {
				return err
			}
		}
		k, n, _ := strings.Cut(string(msg.Data()), ":")
		_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1, $2, $3::int)`, msg.Headers().Get(outbox.HeaderEventID), k, n)
		return err
	}
}

func (f *consumerFixture) effects() int {
	var n int
	if err := f.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects`).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// pull creates a durable pull consumer.
func (f *consumerFixture) pull(name string, mutate func(*jetstream.ConsumerConfig)) jetstream.Consumer {
	cfg := jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := f.js.CreateOrUpdateConsumer(context.Background(), f.stream, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// run starts c.Run; the returned stop cancels it and returns Run's error.
func run(t *testing.T, c *natsjs.Consumer) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return within 30 s of its context being cancelled")
			}
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func (f *consumerFixture) config(handler func(context.Context, pgx.Tx, jetstream.Msg) error) natsjs.ConsumerConfig {
	return natsjs.ConsumerConfig{Name: "effects", DB: f.db.Pool, Inbox: f.in, Handler: handler, MaxDeliveries: 5,
		Backoff: coord.Backoff{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}, MeterProvider: f.tm}
}
