package bad

import (
	"context"
	"database/sql"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

func pgxThenKafka(ctx context.Context, tx pgx.Tx, cl *kgo.Client) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders"}).FirstErr() // want `dualwrite: pgxThenKafka commits \(pgx.Tx.Commit, line 18\) and publishes \(kgo.Client.ProduceSync\); fix: use outbox EnqueueTx in the transaction \(RFC MUST 2\)`
}

func publishThenSQLCommit(tx *sql.Tx, p sarama.SyncProducer) error {
	if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: "orders"}); err != nil { // want `publishThenSQLCommit commits \(sql.Tx.Commit, line 28\) and publishes \(sarama.SyncProducer.SendMessage\)`
		return err
	}
	return tx.Commit()
}

func inClosures(ctx context.Context, conn *pgx.Conn, w *kafka.Writer) error {
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "update orders set paid = true")
		return err
	})
	if err != nil {
		return err
	}
	send := func() error { return w.WriteMessages(ctx, kafka.Message{}) } // want `inClosures commits \(pgx.BeginFunc, line 32\) and publishes \(kafka.Writer.WriteMessages\)`
	return send()
}

func asyncSarama(tx *sql.Tx, p sarama.AsyncProducer) error {
	if err := tx.Commit(); err != nil {
		return err
	}
	p.Input() <- &sarama.ProducerMessage{} // want `sarama.AsyncProducer.Input`
	return nil
}

func natsCore(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	return nc.Publish("orders", nil) // want `nats.Conn.Publish`
}

func natsJS(tx *sql.Tx, js nats.JetStreamContext) error {
	_ = tx.Commit()
	_, err := js.Publish("orders", nil) // want `nats.JetStream.Publish`
	return err
}

func natsJetstream(ctx context.Context, tx *sql.Tx, js jetstream.JetStream) error {
	_ = tx.Commit()
	_, err := js.Publish(ctx, "orders", nil) // want `jetstream.JetStream.Publish`
	return err
}

func rabbit(ctx context.Context, tx *sql.Tx, ch *amqp.Channel) error {
	_ = tx.Commit()
	return ch.PublishWithContext(ctx, "", "orders", false, false, amqp.Publishing{}) // want `amqp091.Channel.PublishWithContext`
}

func watermill(tx *sql.Tx, pub message.Publisher) error {
	_ = tx.Commit()
	return pub.Publish("orders", &message.Message{}) // want `message.Publisher.Publish`
}

var handler = func(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	return nc.Publish("orders", nil) // want `the function literal at line 78 commits`
}

func suppressed(tx *sql.Tx, nc *nats.Conn) error {
	_ = tx.Commit()
	//coordvet:ignore dualwrite owner=platform expires=2026-09-30 best-effort cache invalidation, consumers re-read the row
	return nc.Publish("cache.invalidate", nil)
}
