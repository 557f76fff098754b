// Package dualwrite is the demo's sample of what RFC-COORD-001 MUST 2 prohibits:
// commit, then publish. If the process dies between the two, the order exists and
// nobody hears of it; if the publish succeeds and the commit fails, everybody hears
// of an order that does not exist. coordvet's dualwrite check flags it.
package dualwrite

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

// PlaceOrder stores an order and announces it — the wrong way.
func PlaceOrder(ctx context.Context, pool *pgxpool.Pool, nc *nats.Conn, id string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return nc.Publish("orders.placed", []byte(id))
}
