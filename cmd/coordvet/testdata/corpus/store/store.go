// Package store is the orders repository over pgx.
package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Order is a row of the orders table.
type Order struct {
	ID, Customer string
	Cents        int64
}

// Repo reads and writes orders.
type Repo struct{ Pool *pgxpool.Pool }

// Save inserts an order in the caller's transaction.
func (r *Repo) Save(ctx context.Context, tx pgx.Tx, o Order) error {
	_, err := tx.Exec(ctx, `INSERT INTO orders (id, customer, cents) VALUES ($1, $2, $3)`, o.ID, o.Customer, o.Cents)
	return err
}

// Finish commits, one helper deep.
func (r *Repo) Finish(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

// InTx runs fn in a transaction it commits.
func (r *Repo) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.Pool, fn)
}

// Insert writes outside any transaction (autocommit).
func (r *Repo) Insert(ctx context.Context, o Order) error {
	_, err := r.Pool.Exec(ctx, `INSERT INTO orders (id, customer, cents) VALUES ($1, $2, $3)`, o.ID, o.Customer, o.Cents)
	return err
}

// Get reads one order.
func (r *Repo) Get(ctx context.Context, id string) (Order, error) {
	var o Order
	err := r.Pool.QueryRow(ctx, `SELECT id, customer, cents FROM orders WHERE id = $1`, id).Scan(&o.ID, &o.Customer, &o.Cents)
	return o, err
}

// WithTx runs fn in a transaction it commits, from its own callback.
func (r *Repo) WithTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.Pool, func(tx pgx.Tx) error {
		return fn(ctx, tx)
	})
}
