// Package dualwrite defines an Analyzer that reports functions that both commit
// a database transaction and publish to a message broker.
//
// # Analyzer dualwrite
//
// dualwrite: report a function that commits a database transaction and publishes to a broker
//
// Commit-then-publish (or publish-then-commit) is a dual write: a crash, a
// timeout or a broker outage between the two leaves the database and the
// event stream disagreeing for good, so consumers miss an event or see one for
// a change that never happened (RFC MUST 2). Events derived from state changes
// are written to the outbox table in the same transaction ((*outbox.Outbox).EnqueueTx) and
// published by the outbox relay.
//
// The check reports a function that, counting the closures inside it, both
// commits and publishes. Commits are (*sql.Tx).Commit, pgx Tx.Commit (pgx,
// pgxpool), pgx.BeginFunc and pgx.BeginTxFunc, gorm DB.Commit and
// DB.Transaction. Publishes are franz-go kgo Client.Produce, ProduceSync and
// TryProduce; sarama SyncProducer.SendMessage(s) and AsyncProducer.Input;
// segmentio/kafka-go Writer.WriteMessages; nats.go and nats.go/jetstream
// Publish, PublishMsg, PublishAsync and PublishMsgAsync; amqp091-go and
// streadway/amqp Channel.Publish and PublishWithContext (and their
// deferred-confirm variants); watermill message.Publisher.Publish. The outbox package
// and its subpackages (the relay, the broker publishers) are exempt. Test
// files are checked too.
//
// Both lists are extensible with flags that take comma-separated entries of the
// form importpath:Name (a package function, or a method Name of any type of the
// package) or importpath:Type.Name (a method of one type):
//
//	coordvet -dualwrite.brokers='example.com/bus:Client.Send,example.com/sns:Publish' ./...
//	go vet -vettool=$(which coordvet) -dualwrite.commits='example.com/db:Tx.Commit' ./...
//
// Bad:
//
//	if err := tx.Commit(ctx); err != nil {
//		return err
//	}
//	return producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: ev}).FirstErr()
//
// Good:
//
//	if _, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: id, Type: "order.paid", Payload: ev}); err != nil {
//		return err
//	}
//	return tx.Commit(ctx) // the relay publishes the event iff this commits
package dualwrite
