package outbox_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Enqueue in the business transaction, publish with a relay, dedupe with the inbox.
func Example() {
	pool, done := coordtest.ExamplePostgres()
	defer done()
	ctx := context.Background()

	ob, err := outbox.New(outbox.Config{Table: "outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := ob.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	// The event exists iff this transaction commits.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// ... UPDATE orders SET status = 'paid' ...
		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{
			Topic: "orders", Key: "order-42", Type: "order.paid",
			Payload: []byte(`{"order":"order-42","amount":1200}`), JSON: true,
		})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}

	in, _ := outbox.NewInbox(outbox.InboxConfig{Table: "inbox"})
	if err := in.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	received := make(chan outbox.Message, 1)
	// Any broker: a PublisherFunc. Real ones: outbox/kafka, outbox/natsjs.
	pub := outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		received <- m
		return nil
	})
	relay, _ := ob.NewRelay(pool, pub)
	rctx, stop := context.WithCancel(ctx)
	relayDone := make(chan error)
	go func() { relayDone <- relay.Run(rctx) }()
	var m outbox.Message
	select {
	case m = <-received:
	case <-time.After(30 * time.Second):
		log.Fatal("the relay published nothing within 30 s")
	}
	stop()
	<-relayDone

	// Consumer side: the same delivery twice has one effect.
	for range 2 {
		_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			ran, err := in.ProcessTx(ctx, tx, "billing", m.ID.String(), func(ctx context.Context, tx pgx.Tx) error {
				return nil // ... the consumer's effect, in tx ...
			})
			fmt.Println(m.Type, m.Key, "processed:", ran)
			return err
		})
	}
	// Output:
	// order.paid order-42 processed: true
	// order.paid order-42 processed: false
}

// A rejected event is a typed error and nothing is written.
func ExampleOutbox_EnqueueTx_rejected() {
	pool, done := coordtest.ExamplePostgres()
	defer done()
	ctx := context.Background()
	ob, _ := outbox.New(outbox.Config{Table: "outbox"})
	_ = ob.Migrate(ctx, pool)
	_ = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: "o1", Type: "x", Payload: []byte(`{"a":"\u0000"}`), JSON: true})
		fmt.Println(err)
		return nil
	})
	// Output:
	// outbox: invalid event #0: payload: invalid JSON: contains \u0000, which PostgreSQL jsonb rejects
}
