package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

const crashLock = 600 * time.Millisecond // LockTimeout of the crash test's stores

// psp is a fake payment provider served over real HTTP: it charges once per
// Idempotency-Key and remembers every key it was called with.
type psp struct {
	mu      sync.Mutex
	calls   []string
	charges map[string]string
}

func newPSP(t *testing.T) (*psp, string) {
	p := &psp{charges: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		k := r.Header.Get("Idempotency-Key")
		p.calls = append(p.calls, k)
		id, ok := p.charges[k]
		if !ok {
			id = "ch_" + strconv.Itoa(len(p.charges)+1)
			p.charges[k] = id
		}
		w.Write([]byte(id))
	}))
	t.Cleanup(srv.Close)
	return p, srv.URL
}

func (p *psp) callsFor(key string) (calls int, otherKeys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.calls {
		if k == `"`+key+`"` {
			calls++
		} else {
			otherKeys++
		}
	}
	return calls, otherKeys
}

func newOrders(t *testing.T, db *coordtest.PostgresDB) {
	if _, err := db.Pool.Exec(context.Background(), `CREATE TABLE orders (key text PRIMARY KEY, amount text, charge text)`); err != nil {
		t.Fatal(err)
	}
}

func TestPhasedRunCompletesAndReplays(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	newOrders(t, db)
	p, url := newPSP(t)
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "pay-1"}
	op := paymentOp(url, nil)
	r, err := s.Run(ctx, key, fp("pay 100"), op, []byte("100"))
	if err != nil || r.Replayed || string(r.Response.Body) != `{"charge":"ch_1"}` {
		t.Fatalf("run: %+v %v", r, err)
	}
	r2, err := s.Run(ctx, key, fp("pay 100"), op, []byte("100"))
	if err != nil || !r2.Replayed || string(r2.Response.Body) != string(r.Response.Body) {
		t.Fatalf("replay: %+v %v", r2, err)
	}
	if _, err := s.Run(ctx, key, fp("pay 200"), op, []byte("200")); !errors.Is(err, idempotency.ErrMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	if calls, _ := p.callsFor(key.ID); calls != 1 {
		t.Fatalf("psp calls = %d", calls)
	}
	if _, err := s.Run(ctx, key, fp("x"), &idempotency.Operation{Name: "bad"}, nil); !errors.Is(err, idempotency.ErrInvalidOperation) {
		t.Fatalf("invalid operation: %v", err)
	}
}

// A failing phase releases the lock: the immediate retry resumes after the last
// recovery point (the order is not created twice).
func TestPhasedFailureResumesFromRecoveryPoint(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	newOrders(t, db)
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "pay-2"}
	_, err := s.Run(ctx, key, fp("p"), paymentOp("http://127.0.0.1:1/unreachable", nil), []byte("5"))
	if err == nil {
		t.Fatal("charge against an unreachable provider succeeded")
	}
	_, url := newPSP(t)
	r, err := s.Run(ctx, key, fp("p"), paymentOp(url, nil), []byte("5"))
	if err != nil || r.Replayed {
		t.Fatalf("retry: %+v %v", r, err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE key = $1 AND charge = 'ch_1'`, key.ID).Scan(&n); err != nil || n != 1 {
		t.Fatalf("orders = %d, %v", n, err)
	}
}

// The process running a phased request is killed between phases. A retry (after the
// lock expired) or the completer finishes it; the provider got the same key every
// time and charged once.
func TestPhasedCrashIsFinished(t *testing.T) {
	rep := coordtest.NewResult(t, "phased request: worker killed between phases", coordtest.Faults("worker SIGKILLed between phases"))
	defer coordtest.Report(t, rep)
	reps := coordtest.Pick(1, 5)
	s, db := newStore(t, idempotency.Config{LockTimeout: crashLock})
	newOrders(t, db)
	p, url := newPSP(t)
	op := paymentOp(url, nil)
	completer, err := s.NewCompleter(idempotency.CompleterConfig{}, op)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kills, byRetry, byCompleter, inflight := 0, 0, 0, 0
	trial := 0
	for range reps {
		for _, point := range []string{"after-charge", "in-finish"} {
			for _, via := range []string{"retry", "completer"} {
				trial++
				key := idempotency.Key{Scope: "acme", ID: "crash-" + strconv.Itoa(trial)}
				t.Setenv(workerEnv, point)
				t.Setenv(workerDB, db.URL)
				t.Setenv(workerPSP, url)
				t.Setenv(workerKey, key.ID)
				w := coordtest.StartProcess(t, "worker-"+key.ID, os.Args[0], "-test.run=^$")
				w.WaitOutput(t, workerReady, 30*time.Second)
				w.Kill()
				kills += w.Stats().Kills
				// The dead worker's key is in progress: a lookup says come back later.
				if _, _, err := s.Lookup(ctx, key, fp("pay 100")); errors.Is(err, idempotency.ErrInFlight) {
					inflight++
				} else {
					t.Fatalf("trial %d: key of the killed worker: %v, want ErrInFlight", trial, err)
				}
				time.Sleep(crashLock + 100*time.Millisecond)
				switch via {
				case "retry":
					r, err := s.Run(ctx, key, fp("pay 100"), op, []byte("100"))
					if err != nil {
						t.Fatalf("trial %d (%s): retry: %v", trial, point, err)
					}
					if !r.Replayed {
						byRetry++
					}
				case "completer":
					n, err := completer.RunOnce(ctx)
					if err != nil || n != 1 {
						t.Fatalf("trial %d (%s): completer finished %d, %v", trial, point, n, err)
					}
					byCompleter++
					r, err := s.Run(ctx, key, fp("pay 100"), op, []byte("100"))
					if err != nil || !r.Replayed {
						t.Fatalf("trial %d: after completer: %+v %v", trial, r, err)
					}
				}
				var charge string
				if err := db.Pool.QueryRow(ctx, `SELECT charge FROM orders WHERE key = $1`, key.ID).Scan(&charge); err != nil || charge == "" {
					t.Fatalf("trial %d: order %q, %v", trial, charge, err)
				}
				calls, _ := p.callsFor(key.ID)
				wantCalls := 1
				if point == "after-charge" {
					wantCalls = 2 // the crash lost the recorded result: called again, same key
				}
				if calls != wantCalls {
					t.Fatalf("trial %d (%s): provider called %d times with the key, want %d", trial, point, calls, wantCalls)
				}
			}
		}
	}
	p.mu.Lock()
	distinct := len(p.charges)
	p.mu.Unlock()
	if distinct != trial || kills != trial { // a different key would have made a second charge
		t.Fatalf("charges %d, kills %d, trials %d", distinct, kills, trial)
	}
	t.Logf("%d trials: %d workers killed between phases, %d answered in-flight after the kill, %d finished by retry, %d by the completer, %d charges (one per key)",
		trial, kills, inflight, byRetry, byCompleter, distinct)
	rep.Trials = trial
	rep.Faults["worker SIGKILLed between phases"] = kills
	rep.Outcome["ErrInFlight after the kill"] = int64(inflight)
	rep.Outcome["finished by retry"] = int64(byRetry)
	rep.Outcome["finished by the completer"] = int64(byCompleter)
	rep.Outcome["charges (one per key)"] = int64(distinct)
	rep.Notes = "kill points after-charge and in-finish; the provider got the same key every time"
}

// Operation and phase names are stored as text: one PostgreSQL cannot store (a
// NUL byte, invalid UTF-8) is ErrInvalidOperation before anything runs — not a
// database error after an External phase already called the other system.
func TestPhasedNamesPostgresCannotStoreAreRefused(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{})
	ctx := context.Background()
	calls := 0
	ext := func(context.Context, *idempotency.State) error { calls++; return nil }
	finish := func(_ context.Context, _ pgx.Tx, st *idempotency.State) error {
		st.Response = &idempotency.Response{Status: 200}
		return nil
	}
	for i, op := range []*idempotency.Operation{
		{Name: "pay\x00", Phases: []idempotency.Phase{{Name: "charge", External: ext}, {Name: "finish", Tx: finish}}},
		{Name: "pay\xff", Phases: []idempotency.Phase{{Name: "charge", External: ext}, {Name: "finish", Tx: finish}}},
		{Name: "pay", Phases: []idempotency.Phase{{Name: "charge\x00", External: ext}, {Name: "finish", Tx: finish}}},
		{Name: "pay", Phases: []idempotency.Phase{{Name: "charge\xe2\x82", External: ext}, {Name: "finish", Tx: finish}}},
	} {
		key := idempotency.Key{Scope: "acme", ID: "bad-name-" + strconv.Itoa(i)}
		if _, err := s.Run(ctx, key, fp("x"), op, nil); !errors.Is(err, idempotency.ErrInvalidOperation) {
			t.Errorf("Run(%q, phase %q) = %v, want ErrInvalidOperation", op.Name, op.Phases[0].Name, err)
		}
		if _, err := s.NewCompleter(idempotency.CompleterConfig{}, op); !errors.Is(err, idempotency.ErrInvalidOperation) {
			t.Errorf("NewCompleter(%q, phase %q) = %v, want ErrInvalidOperation", op.Name, op.Phases[0].Name, err)
		}
	}
	if calls != 0 {
		t.Fatalf("the other system was called %d times for operations that cannot be recorded", calls)
	}
}
