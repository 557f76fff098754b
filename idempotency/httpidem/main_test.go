package httpidem_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	store *idempotency.Store
	pool  *pgxpool.Pool
}

// newEnv returns a migrated Store on a fresh schema, on a pool of maxConns
// connections, and an effects table.
func newEnv(t testing.TB, maxConns int, cfg idempotency.Config) *env {
	t.Helper()
	db := coordtest.Postgres(t)
	pc, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := idempotency.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `CREATE TABLE effects (id bigserial PRIMARY KEY, key text NOT NULL, body text)`); err != nil {
		t.Fatal(err)
	}
	return &env{store: s, pool: pool}
}

// handler writes one effects row in the request's transaction and answers 201.
func effectHandler(t testing.TB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := idempotency.TxFromContext(r.Context())
		if !ok {
			http.Error(w, "no tx", 500)
			return
		}
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO effects (key, body) VALUES ($1, $2) RETURNING id`,
			r.Header.Get(httpidem.HeaderName), "x").Scan(&id); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", "/payments/"+strconv.FormatInt(id, 10))
		w.Header().Set("X-Not-Replayed", "1")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":` + strconv.FormatInt(id, 10) + `}`))
	})
}

func scopeFromHeader(r *http.Request) (string, error) {
	if s := r.Header.Get("X-Tenant"); s != "" {
		return s, nil
	}
	return "default", nil
}
