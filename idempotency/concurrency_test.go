package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Do and DoTx racing on one key, many rounds, at the Store level: exactly one
// execution per key, every other call a byte-identical replay or *InFlightError.
func TestStoreConcurrentDoAndDoTx(t *testing.T) {
	rep := coordtest.NewResult(t, "concurrent Do and DoTx on one key", coordtest.Faults("duplicate calls on one key"))
	defer coordtest.Report(t, rep)
	const concurrent = 8 // the shared test pool has few connections; httpidem runs 50
	rounds := coordtest.Pick(15, 60)
	s, db := newStore(t, idempotency.Config{WaitTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	var executed, replayed, inflight int
	for round := range rounds {
		key := idempotency.Key{Scope: "acme", ID: "race-" + strconv.Itoa(round)}
		type out struct {
			res idempotency.Result
			err error
		}
		outs := make([]out, concurrent)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range concurrent {
			wg.Go(func() {
				<-gate
				if i%2 == 0 {
					r, err := s.Do(ctx, key, fp("a"), effect(key, "x"), nil)
					outs[i] = out{r, err}
					return
				}
				err := pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
					r, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "x"), nil)
					outs[i] = out{r, err}
					return err
				})
				if outs[i].err == nil && err != nil {
					outs[i].err = err
				}
			})
		}
		close(gate)
		coordtest.Wait(t, &wg, 60*time.Second, fmt.Sprintf("round %d: the concurrent Do and DoTx", round))
		var body []byte
		for _, o := range outs {
			if o.err == nil && !o.res.Replayed {
				executed++
				body = o.res.Response.Body
			}
		}
		for _, o := range outs {
			switch {
			case o.err == nil && o.res.Replayed:
				replayed++
				if body != nil && !bytes.Equal(o.res.Response.Body, body) {
					t.Fatalf("round %d: replay %q != %q", round, o.res.Response.Body, body)
				}
			case errors.Is(o.err, idempotency.ErrInFlight):
				inflight++
			case o.err != nil:
				t.Fatalf("round %d: %v", round, o.err)
			}
		}
		if n := effectCount(t, db, key); n != 1 {
			t.Fatalf("round %d: %d effects", round, n)
		}
	}
	if executed != rounds {
		t.Fatalf("%d executions in %d rounds", executed, rounds)
	}
	t.Logf("%d rounds × %d: %d executed, %d replayed, %d in flight", rounds, concurrent, executed, replayed, inflight)
	rep.Trials = rounds
	// The fault is the duplicate: a call that met the key already taken (in flight
	// or completed) by a concurrent one.
	rep.Faults["duplicate calls on one key"] = replayed + inflight
	rep.Outcome["executed"] = int64(executed)
	rep.Outcome["replayed byte-identical"] = int64(replayed)
	rep.Outcome["ErrInFlight"] = int64(inflight)
	rep.Notes = "half the calls Do, half DoTx in the caller's transaction; each round's key must have exactly one effect"
}

// A run whose lock expired mid-phase loses the key to the completer: its next
// recovery point fails with ErrLockLost and the completer's run completes the key.
func TestPhasedLockLost(t *testing.T) {
	s, db := newStore(t, idempotency.Config{LockTimeout: 300 * time.Millisecond})
	newOrders(t, db)
	ctx := context.Background()
	entered, release := make(chan struct{}), make(chan struct{})
	var calls sync.Map
	op := &idempotency.Operation{Name: "slow", Phases: []idempotency.Phase{
		{Name: "called", External: func(ctx context.Context, st *idempotency.State) error {
			calls.Store(st.Resumed, st.Key.ID)
			if !st.Resumed {
				close(entered)
				<-release // outlive the lock
			}
			st.Data = []byte("done")
			return nil
		}},
		{Name: "finished", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			st.Response = &idempotency.Response{Status: 200, Body: []byte("resumed=" + strconv.FormatBool(st.Resumed))}
			return nil
		}},
	}}
	c, err := s.NewCompleter(idempotency.CompleterConfig{}, op)
	if err != nil {
		t.Fatal(err)
	}
	key := idempotency.Key{Scope: "acme", ID: "lost"}
	errc := goRun(ctx, s, key, op)
	coordtest.Recv(t, entered, 30*time.Second, "the first run entering its external phase")
	time.Sleep(400 * time.Millisecond)
	if n, err := c.RunOnce(ctx); err != nil || n != 1 {
		t.Fatalf("completer: %d %v", n, err)
	}
	close(release)
	if err := coordtest.Recv(t, errc, 30*time.Second, "the first run returning"); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("first run: %v, want ErrLockLost", err)
	}
	r, err := s.Run(ctx, key, fp("x"), op, nil)
	if err != nil || !r.Replayed || string(r.Response.Body) != "resumed=true" {
		t.Fatalf("after: %+v %v", r, err)
	}
	// Run loops stop on cancel.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Run(cctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NewCompleter(idempotency.CompleterConfig{}, op, op); !errors.Is(err, idempotency.ErrInvalidOperation) {
		t.Fatalf("duplicate operation: %v", err)
	}
}
