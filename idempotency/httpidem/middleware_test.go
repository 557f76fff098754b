package httpidem_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

type reply struct {
	status int
	header http.Header
	body   []byte
}

func post(t testing.TB, c *http.Client, url, key, body string, hdr ...string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(httpidem.HeaderName, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Error(err)
		return reply{}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

func newServer(t testing.TB, e *env, o httpidem.Config) *httptest.Server {
	t.Helper()
	if o.Scope == nil {
		o.Scope = scopeFromHeader
	}
	mw, err := httpidem.Middleware(e.store, o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mw(effectHandler(t)))
	t.Cleanup(srv.Close)
	return srv
}

func effects(t testing.TB, e *env, key string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestHTTPContract(t *testing.T) {
	e := newEnv(t, 8, idempotency.Config{})
	srv := newServer(t, e, httpidem.Config{})
	c := srv.Client()

	first := post(t, c, srv.URL+"/payments", `"key-1"`, `{"amount": 10, "currency": "EUR"}`)
	if first.status != 201 || first.header.Get(httpidem.ReplayedHeader) != "" || first.header.Get("X-Not-Replayed") != "1" {
		t.Fatalf("first: %d %v", first.status, first.header)
	}
	// Field order and whitespace do not matter; the replay is byte-identical.
	again := post(t, c, srv.URL+"/payments", `"key-1"`, `{"currency":"EUR","amount":10}`)
	if again.status != 201 || again.header.Get(httpidem.ReplayedHeader) != "true" || !bytes.Equal(again.body, first.body) ||
		again.header.Get("Location") != first.header.Get("Location") || again.header.Get("Content-Type") != "application/json" ||
		again.header.Get("X-Not-Replayed") != "" {
		t.Fatalf("replay: %d %v %q (first %q)", again.status, again.header, again.body, first.body)
	}
	// Bare token form accepted by default.
	if r := post(t, c, srv.URL+"/payments", `key-1`, `{"amount":10,"currency":"EUR"}`); r.status != 201 || r.header.Get(httpidem.ReplayedHeader) != "true" {
		t.Fatalf("bare token replay: %d", r.status)
	}
	if r := post(t, c, srv.URL+"/payments", `"key-1"`, `{"amount":11,"currency":"EUR"}`); r.status != 422 {
		t.Fatalf("different body: %d, want 422", r.status)
	}
	if r := post(t, c, srv.URL+"/refunds", `"key-1"`, `{"amount":10,"currency":"EUR"}`); r.status != 422 {
		t.Fatalf("different path: %d, want 422", r.status)
	}
	// Another tenant's key-1 is another key.
	if r := post(t, c, srv.URL+"/payments", `"key-1"`, `{"amount":10,"currency":"EUR"}`, "X-Tenant", "other"); r.status != 201 || r.header.Get(httpidem.ReplayedHeader) != "" {
		t.Fatalf("other tenant: %d %v", r.status, r.header)
	}
	if n := effects(t, e, `"key-1"`); n != 2 {
		t.Fatalf("effects = %d, want 2 (one per tenant)", n)
	}
	// Missing, invalid header, invalid body → 400; oversized → 413.
	for name, tc := range map[string]struct {
		key, body string
		hdr       []string
		want      int
	}{
		"missing":        {"", `{}`, nil, 400},
		"unterminated":   {`"abc`, `{}`, nil, 400},
		"bad escape":     {`"a\b"`, `{}`, nil, 400},
		"empty string":   {`""`, `{}`, nil, 400},
		"too long":       {`"` + strings.Repeat("k", 256) + `"`, `{}`, nil, 400},
		"list":           {`"a", "b"`, `{}`, nil, 400},
		"two lines":      {`"a"`, `{}`, []string{httpidem.HeaderName, `"b"`}, 400},
		"invalid json":   {`"j1"`, `{"a":`, nil, 400},
		"invalid utf8":   {`"j2"`, "{\"a\":\"\xff\"}", nil, 400},
		"trailing json":  {`"j3"`, `{} {}`, nil, 400},
		"oversized body": {`"j4"`, `{"a":"` + strings.Repeat("x", 1<<20) + `"}`, nil, 413},
		"bare with sp":   {`a b`, `{}`, nil, 400},
	} {
		if r := post(t, c, srv.URL+"/payments", tc.key, tc.body, tc.hdr...); r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, tc.want)
		}
	}
	// GET passes through untouched (no key needed, no transaction).
	resp, err := c.Get(srv.URL + "/payments")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 { // effectHandler finds no tx
		t.Fatalf("GET: %d", resp.StatusCode)
	}
}

func TestHTTPStrictAndOptional(t *testing.T) {
	e := newEnv(t, 4, idempotency.Config{})
	strict := newServer(t, e, httpidem.Config{Strict: true, Optional: true})
	c := strict.Client()
	if r := post(t, c, strict.URL+"/p", `bare`, `{}`); r.status != 400 {
		t.Fatalf("strict bare token: %d", r.status)
	}
	if r := post(t, c, strict.URL+"/p", `"quoted";v=1`, `{}`); r.status != 201 {
		t.Fatalf("strict quoted with params: %d %s", r.status, r.body)
	}
	if r := post(t, c, strict.URL+"/p", ``, `{}`); r.status != 500 { // optional: passes through, no tx
		t.Fatalf("optional without key: %d", r.status)
	}
}

// A 5xx is not stored: effect and key roll back, the retry runs again.
func TestHTTPServerErrorNotStored(t *testing.T) {
	e := newEnv(t, 4, idempotency.Config{})
	fail := true
	var mu sync.Mutex
	mw, err := httpidem.Middleware(e.store, httpidem.Config{Scope: scopeFromHeader})
	if err != nil {
		t.Fatal(err)
	}
	inner := effectHandler(t)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		f := fail
		fail = false
		mu.Unlock()
		if f {
			tx, _ := idempotency.TxFromContext(r.Context())
			tx.Exec(r.Context(), `INSERT INTO effects (key, body) VALUES ($1, 'half')`, r.Header.Get(httpidem.HeaderName))
			http.Error(w, "upstream down", http.StatusBadGateway)
			return
		}
		inner.ServeHTTP(w, r)
	})))
	defer srv.Close()
	if r := post(t, srv.Client(), srv.URL+"/p", `"k5"`, `{}`); r.status != 502 {
		t.Fatalf("first: %d", r.status)
	}
	if n := effects(t, e, `"k5"`); n != 0 {
		t.Fatalf("5xx left %d effects", n)
	}
	if r := post(t, srv.Client(), srv.URL+"/p", `"k5"`, `{}`); r.status != 201 || r.header.Get(httpidem.ReplayedHeader) != "" {
		t.Fatalf("retry: %d", r.status)
	}
	if n := effects(t, e, `"k5"`); n != 1 {
		t.Fatalf("effects = %d", n)
	}
}

// 50 concurrent requests with one key, many rounds: one effect per key, every other
// answer a 409 (with Retry-After) or a byte-identical replay; afterwards the same key
// with a different body is 422 every time.
func TestHTTPConcurrentSameKey(t *testing.T) {
	rep := coordtest.NewResult(t, "HTTP: 50 concurrent requests with one Idempotency-Key", coordtest.Faults("duplicate requests on one key", "same key, different body"))
	defer coordtest.Report(t, rep)
	const concurrent = 50
	rounds := coordtest.Pick(20, 100)
	e := newEnv(t, 20, idempotency.Config{WaitTimeout: 500 * time.Millisecond})
	mw, err := httpidem.Middleware(e.store, httpidem.Config{Scope: scopeFromHeader})
	if err != nil {
		t.Fatal(err)
	}
	inner := effectHandler(t)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(2 * time.Millisecond) // a real effect takes time: widen the race window
		if r.Header.Get("X-Slow") != "" {
			time.Sleep(700 * time.Millisecond) // outlive WaitTimeout: duplicates get 409
		}
		inner.ServeHTTP(w, r)
	})))
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: concurrent}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var executed, replayed, conflicts, mismatches int
	start := time.Now()
	for round := 0; round < rounds; round++ {
		key := fmt.Sprintf(`"round-%d"`, round)
		var extra []string
		if round%5 == 4 {
			extra = []string{"X-Slow", "1"}
		}
		replies := make([]reply, concurrent)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range concurrent {
			wg.Go(func() {
				<-gate
				replies[i] = post(t, c, srv.URL+"/payments", key, `{"amount":1}`, extra...)
			})
		}
		close(gate)
		coordtest.Wait(t, &wg, 60*time.Second, fmt.Sprintf("round %d: the concurrent requests", round))
		var winner *reply
		for i := range replies {
			r := &replies[i]
			if r.status == 201 && r.header.Get(httpidem.ReplayedHeader) == "" {
				if winner != nil {
					t.Fatalf("round %d: two executions", round)
				}
				winner = r
			}
		}
		if winner == nil {
			// Every request timed out waiting: possible only if the first outlived WaitTimeout.
			t.Fatalf("round %d: no execution among %d replies", round, concurrent)
		}
		executed++
		for i := range replies {
			r := &replies[i]
			switch {
			case r == winner:
			case r.status == 409:
				if r.header.Get("Retry-After") == "" {
					t.Fatalf("round %d: 409 without Retry-After", round)
				}
				conflicts++
			case r.status == 201 && r.header.Get(httpidem.ReplayedHeader) == "true":
				if !bytes.Equal(r.body, winner.body) || r.header.Get("Location") != winner.header.Get("Location") {
					t.Fatalf("round %d: replay %q differs from %q", round, r.body, winner.body)
				}
				replayed++
			default:
				t.Fatalf("round %d: unexpected reply %d %s", round, r.status, r.body)
			}
		}
		if n := effects(t, e, key); n != 1 {
			t.Fatalf("round %d: %d effects, want 1", round, n)
		}
		for range 3 {
			if r := post(t, c, srv.URL+"/payments", key, `{"amount":2}`); r.status != 422 {
				t.Fatalf("round %d: different body got %d, want 422", round, r.status)
			}
			mismatches++
		}
	}
	t.Logf("%d rounds × %d concurrent in %v: %d executed, %d replayed byte-identical, %d × 409, %d × 422",
		rounds, concurrent, time.Since(start).Round(time.Millisecond), executed, replayed, conflicts, mismatches)
	rep.Trials = rounds
	// The fault is the duplicate: a request that met the key already taken (in
	// flight: 409; completed: replay) by a concurrent one.
	rep.Faults["duplicate requests on one key"] = replayed + conflicts
	rep.Faults["same key, different body"] = mismatches
	rep.Outcome["executed"] = int64(executed)
	rep.Outcome["replayed byte-identical"] = int64(replayed)
	rep.Outcome["409 with Retry-After"] = int64(conflicts)
	rep.Outcome["422 on a different body"] = int64(mismatches)
	rep.Notes = "every fifth round's handler outlives WaitTimeout, so duplicates get 409"
	if conflicts == 0 || replayed == 0 {
		t.Fatalf("both outcomes must occur: %d replays, %d conflicts", replayed, conflicts)
	}
	if executed != rounds || replayed+conflicts != rounds*(concurrent-1) || mismatches != 3*rounds {
		t.Fatalf("counts do not add up")
	}
}
