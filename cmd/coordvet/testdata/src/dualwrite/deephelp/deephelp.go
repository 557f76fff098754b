// Package deephelp holds helpers another package calls: facts carry what they do.
package deephelp

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

// Announce publishes: a fact says so to its importers.
func Announce(nc *nats.Conn, id string) error { return nc.Publish("orders.placed", []byte(id)) }

// Save commits one call deeper.
func Save(ctx context.Context, tx pgx.Tx) error { return commit(ctx, tx) }

func commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

// InTx runs fn in a transaction it commits: fn is a transaction callback.
func InTx(ctx context.Context, db pgx.Beginner, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, fn)
}

// InTxWrapped calls fn from its own transaction callback, as most repositories do.
func InTxWrapped(ctx context.Context, db pgx.Beginner, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		return fn(tx)
	})
}
