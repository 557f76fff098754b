// Package outbox is the transactional outbox: an event exists if and only if the
// transaction that enqueued it committed, and a relay publishes it at least once,
// in order per aggregate key, to a broker.
//
//	ob, _ := outbox.New(outbox.Config{})         // table coord_outbox
//	err = ob.Migrate(ctx, pool)                  // versioned; safe from every replica at once
//	tx, _ := pool.Begin(ctx)
//	// ... the state change ...
//	id, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: orderID, Type: "order.paid", Payload: body, JSON: true})
//	_ = tx.Commit(ctx)
//
//	relay, _ := ob.NewRelay(pool, publisher)     // outbox/kafka, outbox/natsjs or a PublisherFunc
//	go relay.Run(ctx)
//
// EnqueueTx validates at write time (UTF-8, no NUL, jsonb-compatible JSON, size,
// non-empty topic/type/key) so a poison event never reaches the table. Relays claim
// work per key with transaction-scoped advisory locks, so several relays run in
// parallel without ever publishing a key's events out of order. A failed publish
// is retried with backoff; after Config.MaxAttempts the event is parked in the
// dead-letter table and only its key waits (Requeue, Discard). Consumers dedupe
// with Inbox.ProcessTx. See docs/outbox.md for the design argument, metrics,
// alert and runbooks.
package outbox
