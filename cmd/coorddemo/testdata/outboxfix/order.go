// Package outboxfix is the demo's sample of the fix for a dual write: the event is
// written to the outbox in the order's transaction and a relay publishes it.
package outboxfix

import (
	"context"

	"github.com/coordkit/coordkit/outbox"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PlaceOrder stores an order and its event atomically.
func PlaceOrder(ctx context.Context, pool *pgxpool.Pool, ob *outbox.Outbox, id string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
		return err
	}
	event := outbox.Event{Topic: "orders", Key: id, Type: "order.placed", Payload: []byte(`{"order":"` + id + `"}`), JSON: true}
	if _, err := ob.EnqueueTx(ctx, tx, event); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
