package idempotency_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(runWorker())
	}
	goleak.VerifyTestMain(m)
}

// full reports whether the long trial counts were asked for (COORD_FULL=1).
// newStore returns a migrated Store on a fresh schema plus an effects table:
// effects(scope, key) counts how often an effect committed.
func newStore(t testing.TB, cfg idempotency.Config) (*idempotency.Store, *coordtest.PostgresDB) {
	t.Helper()
	db := coordtest.Postgres(t)
	s, err := idempotency.New(db.Pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (id bigserial PRIMARY KEY, scope text NOT NULL, key text NOT NULL, note text)`); err != nil {
		t.Fatal(err)
	}
	return s, db
}

// effect writes one effects row for key in tx and answers with a body naming it.
func effect(key idempotency.Key, note string) idempotency.Func {
	return func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO effects (scope, key, note) VALUES ($1, $2, $3) RETURNING id`, key.Scope, key.ID, note).Scan(&id); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: 201, Header: map[string][]string{"Location": {"/effects/" + key.ID}}, Body: []byte(`{"id":` + strconv.FormatInt(id, 10) + `,"note":"` + note + `"}`)}, nil
	}
}

func effectCount(t testing.TB, db *coordtest.PostgresDB, key idempotency.Key) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE scope = $1 AND key = $2`, key.Scope, key.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantEffects fails the test unless key has want effects rows.
func wantEffects(t testing.TB, db *coordtest.PostgresDB, key idempotency.Key, want int) {
	t.Helper()
	if n := effectCount(t, db, key); n != want {
		t.Fatalf("key %v: effects = %d, want %d", key, n, want)
	}
}

// holdKey runs the first request for key in a transaction it leaves uncommitted
// (rolled back when the test ends, unless the caller ends it first): duplicates
// find the key in flight.
func holdKey(t testing.TB, s *idempotency.Store, db *coordtest.PostgresDB, key idempotency.Key) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "first"), nil); err != nil {
		t.Fatal(err)
	}
	return tx
}
