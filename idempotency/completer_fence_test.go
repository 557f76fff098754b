package idempotency_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A completer that claimed several keys runs them one after another; by the
// time it reaches a later key, that key's lock may have expired and a client
// retry may have taken it over and finished it. The completer must then not
// call the key's external system again: it checks its lock before an External
// phase, not only after it.
func TestCompleterDoesNotCallExternalOfAKeyItLost(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{LockTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	var (
		mu      sync.Mutex
		calls   = map[string]int{}
		failing = true
	)
	blockK1 := make(chan struct{})
	enteredK1 := make(chan struct{}, 1)
	op := &idempotency.Operation{Name: "pay", Phases: []idempotency.Phase{
		{Name: "charged", External: func(ctx context.Context, st *idempotency.State) error {
			mu.Lock()
			calls[st.Key.ID]++
			fail := failing
			mu.Unlock()
			if fail {
				return errors.New("provider down")
			}
			if st.Key.ID == "k1" && st.Resumed {
				enteredK1 <- struct{}{}
				<-blockK1
			}
			return nil
		}},
		{Name: "done", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			st.Response = &idempotency.Response{Status: 200, Body: []byte("ok")}
			return nil
		}},
	}}
	k1 := idempotency.Key{Scope: "acme", ID: "k1"}
	k2 := idempotency.Key{Scope: "acme", ID: "k2"}
	// Two abandoned keys: their first runs failed and released their locks.
	for _, k := range []idempotency.Key{k1, k2} {
		if _, err := s.Run(ctx, k, fp("x"), op, nil); err == nil {
			t.Fatal("first run succeeded")
		}
		time.Sleep(10 * time.Millisecond) // k1's lock is the older one: the completer takes it first
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	c, err := s.NewCompleter(idempotency.CompleterConfig{Batch: 2}, op)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		n, _ := c.RunOnce(ctx)
		done <- n
	}()
	coordtest.Recv(t, enteredK1, 30*time.Second, "the completer entering k1's external call") // it holds both keys now
	time.Sleep(400 * time.Millisecond)
	// k2's lock expired: a client retry takes it over and finishes it.
	r, err := s.Run(ctx, k2, fp("x"), op, nil)
	if err != nil || r.Replayed {
		t.Fatalf("retry of k2: %+v %v", r, err)
	}
	close(blockK1)
	if n := coordtest.Recv(t, done, 30*time.Second, "the completer's RunOnce returning"); n != 1 {
		t.Fatalf("completer completed %d keys, want 1 (k1)", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["k2"] != 2 {
		t.Fatalf("k2's provider was called %d times, want 2 (the failed first run, the retry)", calls["k2"])
	}
}

// Run with the wrong operation for an abandoned key is refused, and does not
// leave the key locked: the right operation resumes it at once.
func TestRunWithWrongOperationLeavesTheKeyFree(t *testing.T) {
	s, _ := newStore(t, idempotency.Config{LockTimeout: 30 * time.Second})
	ctx := context.Background()
	fail := true
	mk := func(name string) *idempotency.Operation {
		return &idempotency.Operation{Name: name, Phases: []idempotency.Phase{
			{Name: "call", External: func(ctx context.Context, st *idempotency.State) error {
				if fail {
					return errors.New("provider down")
				}
				return nil
			}},
			{Name: "done", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
				st.Response = &idempotency.Response{Status: 200}
				return nil
			}},
		}}
	}
	a, b := mk("a"), mk("b")
	key := idempotency.Key{Scope: "acme", ID: "op"}
	if _, err := s.Run(ctx, key, fp("x"), a, nil); err == nil {
		t.Fatal("first run succeeded")
	}
	if _, err := s.Run(ctx, key, fp("x"), b, nil); !errors.Is(err, idempotency.ErrInvalidOperation) {
		t.Fatalf("wrong operation: %v", err)
	}
	fail = false
	if r, err := s.Run(ctx, key, fp("x"), a, nil); err != nil || r.Response.Status != 200 {
		t.Fatalf("resume with the right operation: %+v %v", r, err)
	}
}
