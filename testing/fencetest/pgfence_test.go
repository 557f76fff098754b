package fencetest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
	"github.com/coordkit/coordkit/testing/fencetest"
)

// txResource fences a key-value table with the fence table (GuardTx via Exec).
type txResource struct {
	pool  *pgxpool.Pool
	fence *pgfence.Fence
}

func (r txResource) Write(ctx context.Context, tok coord.Token, key, value string) error {
	return r.fence.Exec(ctx, r.pool, tok, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO kv (key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
		return err
	})
}

func (r txResource) Read(ctx context.Context, key string) (string, bool, error) {
	return readKV(ctx, r.pool, key)
}

// rowResource fences each row with its own fence column (RowUpdater).
type rowResource struct {
	pool *pgxpool.Pool
	u    *pgfence.RowUpdater
}

func (r rowResource) Write(ctx context.Context, tok coord.Token, key, value string) error {
	_, err := r.u.Update(ctx, r.pool, tok, []any{key}, value)
	if errors.Is(err, pgfence.ErrRowNotFound) {
		if _, err := r.pool.Exec(ctx, `INSERT INTO kv (key) VALUES ($1) ON CONFLICT DO NOTHING`, key); err != nil {
			return err
		}
		_, err = r.u.Update(ctx, r.pool, tok, []any{key}, value)
		return err
	}
	return err
}

func (r rowResource) Read(ctx context.Context, key string) (string, bool, error) {
	return readKV(ctx, r.pool, key)
}

func readKV(ctx context.Context, pool *pgxpool.Pool, key string) (string, bool, error) {
	var v *string
	err := pool.QueryRow(ctx, `SELECT value FROM kv WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && v == nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return *v, true, nil
}

func kvTable(t *testing.T) (*coordtest.PostgresDB, *pgfence.Fence) {
	t.Helper()
	db := coordtest.Postgres(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE kv (key text PRIMARY KEY, value text, fence bigint NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	f, err := pgfence.New(pgfence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	return db, f
}

func TestPgfenceGuardTxConforms(t *testing.T) {
	t.Parallel()
	etcd := coordtest.Etcd(t)
	db, f := kvTable(t)
	fencetest.Run(t, txResource{pool: db.Pool, fence: f}, fencetest.Config{Endpoints: etcd.Endpoints})
}

func TestPgfenceRowConforms(t *testing.T) {
	t.Parallel()
	etcd := coordtest.Etcd(t)
	db, f := kvTable(t)
	u, err := f.RowUpdater(pgfence.RowSpec{Table: "kv", Set: []string{"value"}, Key: []string{"key"}})
	if err != nil {
		t.Fatal(err)
	}
	fencetest.Run(t, rowResource{pool: db.Pool, u: u}, fencetest.Config{Endpoints: etcd.Endpoints})
}

// The example's in-memory resource passes the kit too.
func TestExampleLedgerConforms(t *testing.T) {
	t.Parallel()
	etcd := coordtest.Etcd(t)
	fencetest.Run(t, &ledger{highest: map[string]coord.Token{}, values: map[string]string{}}, fencetest.Config{Endpoints: etcd.Endpoints})
}
