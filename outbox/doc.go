// Package outbox is the transactional outbox: an event exists if and only if the
// transaction that enqueued it committed, and a relay publishes it at least once,
// in order per aggregate key, to a broker.
//
//	ob, err := outbox.New(outbox.Config{}) // table coord_outbox; a *ConfigError otherwise
//	if err != nil {
//		return err
//	}
//	if err := ob.Migrate(ctx, pool); err != nil { // versioned; safe from every replica at once
//		return err
//	}
//
//	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		// ... the state change, with tx ...
//		_, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: orderID, Type: "order.paid", Payload: body, JSON: true})
//		return err // an invalid event rolls the state change back with it
//	})
//
//	relay, err := ob.NewRelay(pool, publisher) // outbox/kafka, outbox/natsjs or a PublisherFunc
//	if err != nil {
//		return err
//	}
//	go func() {
//		if err := relay.Run(ctx); err != nil && ctx.Err() == nil { // returns when ctx ends
//			slog.Error("outbox relay stopped", "err", err) // e.g. a missing broker destination
//		}
//	}()
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
