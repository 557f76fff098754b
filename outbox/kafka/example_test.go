package kafka_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/outbox/kafka"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The whole path over Kafka (here an in-process kfake cluster): enqueue in the
// business transaction, a relay produces with franz-go, a consumer group member
// applies the effect once, in a transaction with its inbox record, and commits
// the offset after that transaction.
func Example() {
	pool, done := coordtest.ExamplePostgres()
	defer done()
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	seeds := kgo.SeedBrokers(cluster.ListenAddrs()...)

	// Producer side.
	ob, _ := outbox.New(outbox.Config{Table: "outbox"})
	if err := ob.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: "order-42", Type: "order.paid", Payload: []byte(`{"amount":1200}`), JSON: true})
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := kgo.NewClient(seeds)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	pub, err := kafka.New(producer, kafka.Config{Topics: []string{"orders"}}) // checked at start
	if err != nil {
		log.Fatal(err)
	}
	relay, _ := ob.NewRelay(pool, pub)
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error)
	go func() { relayDone <- relay.Run(rctx) }()
	defer func() { stopRelay(); <-relayDone }()

	// Consumer side.
	in, _ := outbox.NewInbox(outbox.InboxConfig{Table: "inbox"})
	if err := in.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE ledger (amount_cents int)`); err != nil {
		log.Fatal(err)
	}
	consumer, err := kafka.NewConsumer(kafka.ConsumerConfig{
		Name: "billing", DB: pool, Inbox: in,
		Handler: func(ctx context.Context, tx pgx.Tx, rec *kgo.Record) error {
			// The effect, in the transaction that records the event id.
			_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES (($1::jsonb->>'amount')::int)`, string(rec.Value))
			return err
		},
	}, seeds, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
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
