// Package fencing holds the billing job's helpers: one fences its writes, one
// only watches the lease.
package fencing

import (
	"context"
	"log/slog"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ChargeAll charges every due invoice under the token.
func ChargeAll(ctx context.Context, pool *pgxpool.Pool, tok coord.Token) error {
	return pgfence.Exec(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE invoices SET charged = true WHERE due < now()`)
		return err
	})
}

// Watch logs when the lease ends; it writes nothing.
func Watch(ctx context.Context, l *correctnesslease.Lease) {
	go func() {
		<-l.Context().Done()
		slog.Warn("billing lease lost", "token", l.Token())
	}()
}

// Describe formats a token for logs.
func Describe(tok coord.Token) string { return tok.String() }
