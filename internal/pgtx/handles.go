package pgtx

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The database vocabulary (docs/architecture.md, "One database vocabulary"): a
// function that takes a database handle takes one of these two, under these
// names; every package re-declares them by alias (type DBTX = pgtx.DBTX), so a
// handle is the same type in all of them.

// DBTX runs statements: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (sqlc's name and
// method set). Single statements and reads take one, in the caller's transaction
// when it passes a pgx.Tx.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Beginner starts a transaction: a *pgxpool.Pool, *pgx.Conn or pgx.Tx (a
// savepoint). A function that runs its own transaction takes one.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}
