package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
)

// runPayment: a client pays with an Idempotency-Key; the provider is slow, the
// client times out and retries with the same key — the retry waits for the first
// request and replays its response; a reuse of the key for another amount is 422.
func runPayment(ctx context.Context, e *env) (string, bool) {
	store, err := idempotency.New(e.pool, idempotency.Config{Table: "payment_keys", Logger: quiet})
	if err != nil {
		return err.Error(), false
	}
	if err := store.Migrate(ctx, e.pool); err != nil {
		return "migrate: " + err.Error(), false
	}
	if _, err := e.pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, customer text NOT NULL, amount int NOT NULL)`); err != nil {
		return err.Error(), false
	}
	mw, err := httpidem.Middleware(store, httpidem.Config{Scope: func(r *http.Request) (string, error) { return "shop-1", nil }})
	if err != nil {
		return err.Error(), false
	}
	charge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := idempotency.TxFromContext(r.Context())
		time.Sleep(400 * time.Millisecond) // the payment provider is slow today
		var id int64
		if err := tx.QueryRow(r.Context(), `INSERT INTO payments (customer, amount) VALUES ('cus_42', 1999) RETURNING id`).Scan(&id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment":%d,"amount":1999,"at":%q}`, id, time.Now().Format(time.RFC3339Nano))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err.Error(), false
	}
	srv := &http.Server{Handler: mw(charge)}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/payments"

	post := func(timeout time.Duration, body string) (*http.Response, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
		req.Header.Set(httpidem.HeaderName, `"pay-2026-11-cus_42"`)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	body := `{"customer":"cus_42","amount":1999}`
	step("POST /payments with Idempotency-Key \"pay-2026-11-cus_42\"; the client gives up after 150 ms")
	_, _, err = post(150*time.Millisecond, body)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return fmt.Sprintf("expected a client timeout, got %v", err), false
	}
	step("the client timed out: did the charge happen? It retries with the same key")
	resp, first, err := post(5*time.Second, body)
	if err != nil {
		return err.Error(), false
	}
	if resp.Header.Get(httpidem.ReplayedHeader) == "true" {
		step("retry → %d, replayed: the first attempt had charged; %s", resp.StatusCode, first)
	} else {
		step("retry → %d, executed: the first attempt was cancelled with its client and rolled back, key included; %s", resp.StatusCode, first)
	}
	resp, second, err := post(5*time.Second, `{ "amount": 1999, "customer": "cus_42" }`)
	if err != nil {
		return err.Error(), false
	}
	replayed := resp.Header.Get(httpidem.ReplayedHeader) == "true"
	identical := resp.StatusCode == http.StatusCreated && bytes.Equal(first, second)
	step("another retry, JSON fields reordered → %d, %s: %v, byte-identical body: %v", resp.StatusCode, httpidem.ReplayedHeader, replayed, identical)
	resp, _, err = post(5*time.Second, `{"customer":"cus_42","amount":99900}`)
	if err != nil {
		return err.Error(), false
	}
	step("same key, amount 99900 → %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	mismatch := resp.StatusCode == http.StatusUnprocessableEntity

	var charges int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&charges); err != nil {
		return err.Error(), false
	}
	verdict := fmt.Sprintf("4 requests, %d charge; later retry replayed: %v, byte-identical: %v; key reused for another amount → 422: %v",
		charges, replayed, identical, mismatch)
	return verdict, charges == 1 && replayed && identical && mismatch
}
