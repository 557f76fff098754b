// Package pgfence is a stub of the coordkit resource-side fence.
package pgfence

import (
	"context"

	"github.com/coordkit/coordkit/coord"
	"github.com/jackc/pgx/v5"
)

type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

func Exec(ctx context.Context, db Beginner, tok coord.Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return nil
}

func GuardTx(ctx context.Context, tx pgx.Tx, tok coord.Token) error { return nil }

type Fence struct{}

func (f *Fence) Exec(ctx context.Context, db Beginner, tok coord.Token, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return nil
}

func (f *Fence) GuardTx(ctx context.Context, tx pgx.Tx, tok coord.Token) error { return nil }
