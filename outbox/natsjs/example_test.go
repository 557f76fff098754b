package natsjs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/natsjs"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// exampleEnv gives an example a pool on a fresh schema of the test PostgreSQL
// and a JetStream connection to the test NATS server, with a stream ORDERS_<n>
// capturing orders<n>.>.
func exampleEnv() (pool *pgxpool.Pool, js jetstream.JetStream, stream, prefix string, done func()) {
	ctx := context.Background()
	pool, dropSchema := coordtest.ExamplePostgres()
	n := time.Now().UnixNano()
	nc, err := nats.Connect(coordtest.ExampleNATSURL())
	if err != nil {
		log.Fatal(err)
	}
	if js, err = jetstream.New(nc); err != nil {
		log.Fatal(err)
	}
	stream, prefix = fmt.Sprintf("ORDERS_%d", n), fmt.Sprintf("orders%d", n)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		log.Fatal(err)
	}
	return pool, js, stream, prefix, func() {
		_ = js.DeleteStream(ctx, stream)
		nc.Close()
		dropSchema()
	}
}

// The whole path: enqueue in the business transaction, a relay publishes to
// JetStream, a Consumer applies the effect once, in a transaction with its inbox
// record, and acknowledges after the commit.
func Example() {
	pool, js, stream, prefix, done := exampleEnv()
	defer done()
	ctx := context.Background()

	// Producer side.
	ob, _ := outbox.New(outbox.Config{Table: "outbox"})
	if err := ob.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "paid", Key: "order-42", Type: "order.paid", Payload: []byte(`{"amount":1200}`), JSON: true})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	pub, err := natsjs.New(js, natsjs.Config{
		Subject:  func(m outbox.Message) string { return prefix + "." + m.Topic },
		Subjects: []string{prefix + ".paid"}, // checked when the relay starts
	})
	if err != nil {
		log.Fatal(err)
	}
	relay, _ := ob.NewRelay(pool, pub)
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error)
	go func() { relayDone <- relay.Run(rctx) }()
	defer func() { stopRelay(); <-relayDone }()

	// Consumer side: a durable pull consumer (explicit acks), the inbox, a handler.
	in, _ := outbox.NewInbox(outbox.InboxConfig{Table: "inbox"})
	if err := in.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE ledger (amount_cents int)`); err != nil {
		log.Fatal(err)
	}
	jc, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "billing", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := natsjs.NewConsumer(jc, natsjs.ConsumerConfig{
		Name: "billing", DB: pool, Inbox: in,
		Handler: func(ctx context.Context, tx pgx.Tx, msg jetstream.Msg) error {
			// The effect, in the transaction that records the event id.
			_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES (($1::jsonb->>'amount')::int)`, string(msg.Data()))
			return err
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	cctx, stopConsumer := context.WithCancel(ctx)
	consumerDone := make(chan error)
	go func() { consumerDone <- consumer.Run(cctx) }()
	var total int
	for deadline := time.Now().Add(30 * time.Second); total == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		_ = pool.QueryRow(ctx, `SELECT coalesce(sum(amount_cents), 0) FROM ledger`).Scan(&total)
	}
	fmt.Println("ledger total:", total)
	stopConsumer()
	fmt.Println("consumer stopped:", <-consumerDone)
	// Output:
	// ledger total: 1200
	// consumer stopped: <nil>
}
