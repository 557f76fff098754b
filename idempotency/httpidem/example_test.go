package httpidem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A charge endpoint behind the middleware: the handler reads its JSON body as usual
// and writes the charge in the request's transaction, which also stores the key;
// a retry with the same Idempotency-Key replays the response and charges nothing.
func ExampleMiddleware() {
	ctx := context.Background()
	pool, done := coordtest.ExamplePostgres()
	defer done()
	if _, err := pool.Exec(ctx, "CREATE TABLE charges (id bigserial PRIMARY KEY, amount bigint NOT NULL)"); err != nil {
		log.Fatal(err)
	}

	store, err := idempotency.New(pool, idempotency.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	mw, err := httpidem.Middleware(store, httpidem.Config{
		Scope: func(r *http.Request) (string, error) { // the tenant, from your auth layer
			if t := r.Header.Get("X-Tenant"); t != "" {
				return t, nil
			}
			return "", errors.New("no tenant")
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Amount int64 }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tx, _ := idempotency.TxFromContext(r.Context())
		var id int64
		if err := tx.QueryRow(r.Context(), "INSERT INTO charges (amount) VALUES ($1) RETURNING id", req.Amount).Scan(&id); err != nil {
			http.Error(w, "charge failed", http.StatusInternalServerError) // 5xx: nothing is stored
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d,"amount":%d}`, id, req.Amount)
	})
	srv := httptest.NewServer(mw(charge))
	defer srv.Close()

	for range 2 { // the client retries, say after a timeout
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{"amount": 1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant", "acme")
		req.Header.Set(httpidem.HeaderName, `"order-17-charge"`)
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get(httpidem.ReplayedHeader), string(body))
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM charges").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("charges:", n)
	// Output:
	// 201  {"id":1,"amount":1000}
	// 201 true {"id":1,"amount":1000}
	// charges: 1
}
