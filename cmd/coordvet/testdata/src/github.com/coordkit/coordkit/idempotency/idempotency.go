// Package idempotency is a stub of the coordkit idempotency keys.
package idempotency

import (
	"context"

	"github.com/jackc/pgx/v5"
)

type Key struct{ Scope, ID string }

type Fingerprint [32]byte

type Response struct{ Status int }

type Result struct{ Response Response }

type Func func(ctx context.Context, tx pgx.Tx) (Response, error)

type DoOpts struct{}

type Store struct{}

func (s *Store) Do(ctx context.Context, key Key, fp Fingerprint, fn Func, opts *DoOpts) (Result, error) {
	return Result{}, nil
}

func (s *Store) DoTx(ctx context.Context, tx pgx.Tx, key Key, fp Fingerprint, fn Func, opts *DoOpts) (Result, error) {
	return Result{}, nil
}
