// Package pgx is a stub of github.com/jackc/pgx/v5.
package pgx

import "context"

type Tx interface {
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	Exec(ctx context.Context, sql string, args ...any) (any, error)
}

type Conn struct{}

func (c *Conn) Begin(ctx context.Context) (Tx, error) { return nil, nil }

type Beginner interface {
	Begin(ctx context.Context) (Tx, error)
}

type TxOptions struct{}

func BeginFunc(ctx context.Context, db Beginner, fn func(Tx) error) error { return nil }

func BeginTxFunc(ctx context.Context, db Beginner, opts TxOptions, fn func(Tx) error) error {
	return nil
}

type Rows interface{ Close() }
