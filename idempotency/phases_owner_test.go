package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// blockingOp is a two-phase operation whose External phase signals entered and
// waits for release on its first call (later calls go straight through).
func blockingOp(calls *atomic.Int64, entered, release chan struct{}) *idempotency.Operation {
	return &idempotency.Operation{Name: "blocking", Phases: []idempotency.Phase{
		{Name: "called", External: func(ctx context.Context, st *idempotency.State) error {
			if calls.Add(1) == 1 {
				close(entered)
				<-release
			}
			st.Data = []byte("called")
			return nil
		}},
		{Name: "finished", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			st.Response = &idempotency.Response{Status: 200, Body: []byte("done")}
			return nil
		}},
	}}
}

// goRun runs op for key (fingerprint fp("x")) in a goroutine of its own and
// returns the channel its error arrives on.
func goRun(ctx context.Context, s *idempotency.Store, key idempotency.Key, op *idempotency.Operation) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, key, fp("x"), op, nil)
		errc <- err
	}()
	return errc
}

// TestPhasedRunInFlightIsNotTakenOver: while a phased request holds a live lock
// (inside its external call), a retry with the same key is told to come back
// later; it never takes the key over nor calls the external system a second time.
func TestPhasedRunInFlightIsNotTakenOver(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{LockTimeout: 10 * time.Second})
	ctx := context.Background()
	var calls atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	op := blockingOp(&calls, entered, release)
	key := idempotency.Key{Scope: "acme", ID: "in-flight"}
	errc := goRun(ctx, s, key, op)
	coordtest.Recv(t, entered, 30*time.Second, "the first run entering its external call")
	_, err := s.Run(ctx, key, fp("x"), op, nil)
	// A Do with the key is told when to come back: when the lock runs out (about
	// LockTimeout from the claim), and how old the request in progress is.
	time.Sleep(300 * time.Millisecond)
	_, doErr := s.Do(ctx, key, fp("x"), effect(key, "do"), nil)
	close(release)
	var ife *idempotency.InFlightError
	if !errors.As(doErr, &ife) || ife.RetryAfter < 5*time.Second || ife.RetryAfter > 11*time.Second || ife.Age < 300*time.Millisecond || ife.Age > 30*time.Second {
		t.Fatalf("Do while a phased run holds the key's 10 s lock: %v (%+v), want *InFlightError with RetryAfter the lock's remaining time and Age ≥ 300ms", doErr, ife)
	}
	if !errors.Is(err, idempotency.ErrInFlight) {
		t.Fatalf("retry while the first run holds a live lock: %v, want ErrInFlight", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the external system was called %d times, want once", n)
	}
	if err := coordtest.Recv(t, errc, 30*time.Second, "the first run returning"); err != nil {
		t.Fatalf("first run: %v", err)
	}
}

// TestPhasedRunThatLostItsLockRecordsNothing: the first run outlives its lock
// inside the external call; a retry takes the key over and is itself still in
// progress when the first run returns from the call. The first run must not
// record its recovery point over the new owner's: ErrLockLost.
func TestPhasedRunThatLostItsLockRecordsNothing(t *testing.T) {
	s, db := newStore(t, idempotency.Config{LockTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	entered1, release1 := make(chan struct{}), make(chan struct{})
	entered2, release2 := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	op := &idempotency.Operation{Name: "two-owners", Phases: []idempotency.Phase{
		{Name: "called", External: func(ctx context.Context, st *idempotency.State) error {
			n := calls.Add(1)
			switch n {
			case 1:
				close(entered1)
				<-release1
			case 2:
				close(entered2)
				<-release2
			}
			st.Data = []byte(fmt.Sprintf("called by run %d", n))
			return nil
		}},
		{Name: "finished", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			st.Response = &idempotency.Response{Status: 200, Body: []byte("done")}
			return nil
		}},
	}}
	key := idempotency.Key{Scope: "acme", ID: "two-owners"}
	first, second := make(chan error, 1), make(chan error, 1)
	go func() { _, err := s.Run(ctx, key, fp("x"), op, nil); first <- err }()
	coordtest.Recv(t, entered1, 30*time.Second, "the first run entering its external call")
	time.Sleep(400 * time.Millisecond) // past the first run's lock
	go func() { _, err := s.Run(ctx, key, fp("x"), op, nil); second <- err }()
	coordtest.Recv(t, entered2, 30*time.Second, "the retry taking the key over and entering the external call")
	close(release1)
	if err := coordtest.Recv(t, first, 30*time.Second, "the first run returning"); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("first run, its lock taken over: %v, want ErrLockLost", err)
	}
	// The key is the retry's, which has recorded nothing yet.
	var rp string
	var data []byte
	if err := db.Pool.QueryRow(ctx, `SELECT recovery_point, recovery_data FROM `+idempotency.DefaultTable+` WHERE scope = $1 AND idem_key = $2`,
		key.Scope, key.ID).Scan(&rp, &data); err != nil {
		t.Fatal(err)
	}
	if rp != "started" || data != nil {
		t.Fatalf("after the first run lost its lock the key records %q with %q: the stale owner wrote its recovery point", rp, data)
	}
	close(release2)
	if err := coordtest.Recv(t, second, 30*time.Second, "the retry returning"); err != nil {
		t.Fatalf("retry: %v", err)
	}
}
