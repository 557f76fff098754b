package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/idempotency/httpidem"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Idempotency benchmarks. Every variant runs in the same loop iteration, one after
// the other, against the same Postgres, so load from elsewhere hits all of them
// alike and the ratios are same-run ratios:
//
//	cd bench && go test -run '^$' -bench 'IdempotencyNewKey|IdempotencyReplay$' -benchtime 2000x -count 3 .
//	cd bench && go test -run '^$' -bench 'IdempotencyReplayParallel16' -benchtime 2000x -count 3 .
//
// NewKey: a request with a new key.
//   - bare:  BEGIN; INSERT effect; COMMIT — the effect with no idempotency at all.
//   - naive: the Stripe-style transaction: BEGIN; INSERT key ON CONFLICT DO NOTHING;
//     INSERT effect; UPDATE key SET response; COMMIT.
//   - do:    Store.Do (BEGIN + advisory try-lock + read of the key in one pipelined
//     round trip, the effect, the key row INSERT pipelined with COMMIT). Targets
//     do/bare ≤ 1.2 and do/naive ≤ 0.85 (p50).
//   - do-assumenew: Store.Do with DoOpts.AssumeNew (the same plan, forced).
//   - dotx:  BEGIN; Store.DoTx; COMMIT (the caller owns the transaction: its BEGIN
//     and COMMIT are round trips of their own, so 5 in all, like naive).
//
// Replay: a request whose key completed.
//   - pk:     SELECT body FROM plain WHERE (scope, key) = … — a plain primary-key read.
//   - replay: Store.Do on a completed key (the Store has seen only replays, so it
//     reads the key first, without a transaction). Target replay/pk ≤ 1.1 (p50).
//   - http-pk / http-replay: the same through a real HTTP server: a handler doing the
//     plain read vs the middleware replaying; their ratio is the middleware overhead.

type idemBench struct {
	pool  *pgxpool.Pool
	rt    *coordtest.RoundTrips
	store *idempotency.Store
	seq   atomic.Int64
}

func newIdemBench(b *testing.B) *idemBench {
	db := coordtest.Postgres(b)
	ctx := context.Background()
	pool, rt := countedPool(b, db, 20)
	store, err := idempotency.New(pool, idempotency.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE effects (id bigserial PRIMARY KEY, account text NOT NULL, amount bigint NOT NULL)`,
		`CREATE TABLE naive_keys (scope text, idem_key text, fingerprint bytea NOT NULL, status smallint NOT NULL,
			response_status int, response_body bytea, created_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (scope, idem_key))`,
		`CREATE TABLE plain (scope text, idem_key text, body bytea, PRIMARY KEY (scope, idem_key))`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	return &idemBench{pool: pool, rt: rt, store: store}
}

var idemBody = []byte(`{"id":"ch_1234567890","amount":1000,"currency":"EUR","status":"succeeded"}`)

func idemEffect(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
	_, err := tx.Exec(ctx, `INSERT INTO effects (account, amount) VALUES ('acct_1', 1000)`)
	return idempotency.Response{Status: 201, Body: idemBody}, err
}

func (e *idemBench) key() idempotency.Key {
	return idempotency.Key{Scope: "tenant-1", ID: "key-" + strconv.FormatInt(e.seq.Add(1), 10)}
}

func BenchmarkIdempotencyNewKey(b *testing.B) {
	e := newIdemBench(b)
	ctx := context.Background()
	fp := idempotency.FingerprintOf([]byte("POST"), []byte("/charges"), idemBody)
	t := newOpTimer(e.rt)
	variants := []struct {
		name string
		run  func() error
	}{
		{"bare", func() error {
			return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
				_, err := idemEffect(ctx, tx)
				return err
			})
		}},
		{"naive", func() error {
			k := e.key()
			return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
				var ok bool
				if err := tx.QueryRow(ctx, `INSERT INTO naive_keys (scope, idem_key, fingerprint, status) VALUES ($1, $2, $3, 1)
					ON CONFLICT DO NOTHING RETURNING true`, k.Scope, k.ID, fp[:]).Scan(&ok); err != nil {
					return err
				}
				resp, err := idemEffect(ctx, tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `UPDATE naive_keys SET status = 2, response_status = $3, response_body = $4 WHERE scope = $1 AND idem_key = $2`,
					k.Scope, k.ID, resp.Status, resp.Body)
				return err
			})
		}},
		{"do", func() error {
			_, err := e.store.Do(ctx, e.key(), fp, idemEffect, nil)
			return err
		}},
		{"do-assumenew", func() error {
			_, err := e.store.Do(ctx, e.key(), fp, idemEffect, &idempotency.DoOpts{AssumeNew: true})
			return err
		}},
		{"dotx", func() error {
			return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
				_, err := e.store.DoTx(ctx, tx, e.key(), fp, idemEffect, nil)
				return err
			})
		}},
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Rotate the order so no variant always follows the same neighbour.
		for j := range variants {
			v := variants[(i+j)%len(variants)]
			if err := t.time(v.name, v.run); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	t.report(b, "bare", "naive", "do", "do-assumenew", "dotx")
}

func BenchmarkIdempotencyReplay(b *testing.B) {
	e := newIdemBench(b)
	ctx := context.Background()
	const keys = 1000
	fp := idempotency.FingerprintOf([]byte("POST"), []byte("/charges"), []byte(`{"amount":1000}`))
	jfp, err := idempotency.FingerprintJSON("POST", "/charges", []byte(`{"amount":1000}`))
	if err != nil {
		b.Fatal(err)
	}
	for i := range keys {
		k := idempotency.Key{Scope: "tenant-1", ID: "r" + strconv.Itoa(i)}
		if _, err := e.store.Do(ctx, k, fp, idemEffect, nil); err != nil {
			b.Fatal(err)
		}
		hk := idempotency.Key{Scope: "tenant-1", ID: "h" + strconv.Itoa(i)}
		if _, err := e.store.Do(ctx, hk, jfp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			return idempotency.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}}, Body: idemBody}, nil
		}, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO plain VALUES ('tenant-1', $1, $2)`, "r"+strconv.Itoa(i), idemBody); err != nil {
			b.Fatal(err)
		}
	}
	// Real HTTP servers: the plain one reads the row itself; the other is the middleware.
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if err := e.pool.QueryRow(r.Context(), `SELECT body FROM plain WHERE scope = $1 AND idem_key = $2`, "tenant-1", r.Header.Get("Idempotency-Key")).Scan(&body); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write(body)
	}))
	defer plainSrv.Close()
	mw, err := httpidem.Middleware(e.store, httpidem.Config{Scope: func(*http.Request) (string, error) { return "tenant-1", nil }})
	if err != nil {
		b.Fatal(err)
	}
	idemSrv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "effect ran on a replay", 500)
	})))
	defer idemSrv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	post := func(url, key string, status int) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/charges", strings.NewReader(`{"amount":1000}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != status {
			return fmt.Errorf("%s: status %d", url, resp.StatusCode)
		}
		return nil
	}

	t := newOpTimer(e.rt)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := strconv.Itoa(i % keys)
		var body []byte
		err := t.time("pk", func() error {
			return e.pool.QueryRow(ctx, `SELECT body FROM plain WHERE scope = $1 AND idem_key = $2`, "tenant-1", "r"+n).Scan(&body)
		})
		if err == nil {
			err = t.time("replay", func() error {
				r, err := e.store.Do(ctx, idempotency.Key{Scope: "tenant-1", ID: "r" + n}, fp, idemEffect, nil)
				if err == nil && !r.Replayed {
					err = fmt.Errorf("not a replay")
				}
				return err
			})
		}
		if err == nil {
			err = t.time("http-pk", func() error { return post(plainSrv.URL, "r"+n, 201) })
		}
		if err == nil {
			err = t.time("http-replay", func() error { return post(idemSrv.URL, `"h`+n+`"`, 201) })
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	t.report(b, "pk", "replay")
	t.report(b, "http-pk", "http-replay")
}

// BenchmarkIdempotencyReplayParallel16: replays per second with 16 goroutines,
// against plain primary-key reads in the same run.
func BenchmarkIdempotencyReplayParallel16(b *testing.B) {
	e := newIdemBench(b)
	ctx := context.Background()
	const keys = 1000
	fp := idempotency.FingerprintOf([]byte("x"))
	for i := range keys {
		k := idempotency.Key{Scope: "tenant-1", ID: "r" + strconv.Itoa(i)}
		if _, err := e.store.Do(ctx, k, fp, idemEffect, nil); err != nil {
			b.Fatal(err)
		}
		if _, err := e.pool.Exec(ctx, `INSERT INTO plain VALUES ('tenant-1', $1, $2)`, "r"+strconv.Itoa(i), idemBody); err != nil {
			b.Fatal(err)
		}
	}
	trips := map[string][2]int64{} // round trips, operations
	run := func(name string, per int, f func(i int) error) float64 {
		var n atomic.Int64
		rt0 := e.rt.Count()
		start := time.Now()
		done := make(chan error, 16)
		for range 16 {
			go func() {
				for j := 0; j < per; j++ {
					if err := f(int(n.Add(1)) % keys); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for range 16 {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		rate := float64(n.Load()) / time.Since(start).Seconds()
		c := trips[name]
		trips[name] = [2]int64{c[0] + e.rt.Count() - rt0, c[1] + n.Load()}
		return rate
	}
	pkRead := func(i int) error {
		var body []byte
		return e.pool.QueryRow(ctx, `SELECT body FROM plain WHERE scope = $1 AND idem_key = $2`, "tenant-1", "r"+strconv.Itoa(i)).Scan(&body)
	}
	replay := func(i int) error {
		_, err := e.store.Do(ctx, idempotency.Key{Scope: "tenant-1", ID: "r" + strconv.Itoa(i)}, fp, idemEffect, nil)
		return err
	}
	run("warm", 20, pkRead) // warm up: open the pool's connections, prepare statements
	run("warm", 20, replay)
	b.ResetTimer()
	// Alternate in slices so drifting load hits both alike.
	per := max(b.N/4, 1) // per goroutine and slice: 16 × b.N ops in all
	var pk, rp float64
	for range 4 {
		pk += run("pk", per, pkRead) / 4
		rp += run("replay", per, replay) / 4
	}
	b.StopTimer()
	b.ReportMetric(pk, "pk-ops/s")
	b.ReportMetric(rp, "replay-ops/s")
	b.ReportMetric(rp/pk, "replay/pk-throughput")
	for _, n := range []string{"pk", "replay"} {
		b.ReportMetric(float64(trips[n][0])/float64(trips[n][1]), n+"-rt")
	}
}
