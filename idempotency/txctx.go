package idempotency

import (
	"context"

	"github.com/jackc/pgx/v5"
)

type txKey struct{}

// ContextWithTx returns ctx carrying tx; the HTTP middleware and the gRPC
// interceptor use it to hand the request's transaction to the handler.
func ContextWithTx(ctx context.Context, tx pgx.Tx) context.Context {
	return context.WithValue(ctx, txKey{}, tx)
}

// TxFromContext returns the transaction the middleware opened for this request:
// write the effect in it, and it commits together with the idempotency key. ok is
// false outside the middleware.
func TxFromContext(ctx context.Context) (tx pgx.Tx, ok bool) {
	tx, ok = ctx.Value(txKey{}).(pgx.Tx)
	return tx, ok
}
