package saga

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Starting a saga of a definition this client never registered is refused before
// anything is stored: nobody would ever drive it (river refuses to insert a job
// kind its client has no worker for, for the same reason).
func TestStartRefusesAnUnregisteredDefinition(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := NewClient(e.db.Pool, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	def := orderSaga(t, e.p)
	if _, err := Start(ctx, c, def, order{}, &StartOpts{ID: "unregistered"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Start of an unregistered definition: %v, want ErrUnknownType", err)
	}
	tx, err := e.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := StartTx(ctx, tx, c, def, order{}, &StartOpts{ID: "unregistered-tx"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("StartTx of an unregistered definition: %v, want ErrUnknownType", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("the caller's transaction must stay usable: %v", err)
	}
	// Another definition registered under the same name, with other steps, is not
	// this one: its runners could not drive it.
	other, err := New[order](def.Name(), Pivot("only", func(context.Context, StepContext, *order) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(other); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, c, def, order{}, &StartOpts{ID: "shape"}); !errors.Is(err, ErrUnknownType) {
		t.Fatalf("Start of a definition whose name is registered with other steps: %v, want ErrUnknownType", err)
	}
	if list, err := c.List(ctx, nil); err != nil || len(list) != 0 {
		t.Fatalf("sagas stored: %d %v, want none", len(list), err)
	}
	// The same definition built twice (same name, same steps) is the same saga type.
	c2, err := NewClient(e.db.Pool, fastConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if err := c2.Register(orderSaga(t, e.p)); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(ctx, c2, def, order{}, &StartOpts{ID: "rebuilt"}); err != nil {
		t.Fatalf("Start with an equal definition registered: %v", err)
	}
}

// Registering the very same *Definition twice is a no-op, as the godoc says;
// another definition with the same name is still an error.
func TestRegisterTheSameDefinitionTwice(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://unused") // NewClient does not connect
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c, err := NewClient(pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok := func(context.Context, StepContext, *int) error { return nil }
	def, err := New("pay", Pivot("charge", ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(def); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(def); err != nil {
		t.Fatalf("Register of the same *Definition again: %v, want nil", err)
	}
	if err := c.Register(def, def); err != nil {
		t.Fatalf("Register(def, def): %v, want nil", err)
	}
	other, err := New("pay", Pivot("charge", ok))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Register(other); !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("Register of another definition named %q: %v, want ErrInvalidDefinition", "pay", err)
	}
}

// A definition of retriable steps only has no pivot: that is the error it gets,
// not "retriable step 0 comes before the pivot".
func TestNewWithoutPivotOfRetriableStepsIsErrNoPivot(t *testing.T) {
	ok := func(context.Context, StepContext, *int) error { return nil }
	_, err := New("s", Retriable("a", ok), Retriable("b", ok))
	var de *DefinitionError
	if !errors.Is(err, ErrNoPivot) || !errors.As(err, &de) {
		t.Fatalf("New(retriable, retriable) = %v, want ErrNoPivot in a *DefinitionError", err)
	}
	// With a pivot after them, the order is what is wrong.
	if _, err := New("s", Retriable("a", ok), Pivot("p", ok)); errors.Is(err, ErrNoPivot) || !errors.Is(err, ErrInvalidDefinition) {
		t.Fatalf("New(retriable, pivot) = %v, want ErrInvalidDefinition (not ErrNoPivot)", err)
	}
}

// NewClient says so when Concurrency exceeds the pool: the runners would wait for
// connections (pgxpool's default is max(4, NumCPU)).
func TestNewClientWarnsWhenConcurrencyExceedsThePool(t *testing.T) {
	for _, tc := range []struct {
		maxConns, concurrency int
		warn                  bool
	}{
		{4, 0, true},   // the default Concurrency (16) on a 4-connection pool
		{4, 4, false},  // fits
		{32, 0, false}, // the default fits
		{8, 9, true},
	} {
		pc, err := pgxpool.ParseConfig("postgres://unused")
		if err != nil {
			t.Fatal(err)
		}
		pc.MaxConns = int32(tc.maxConns)
		pool, err := pgxpool.NewWithConfig(context.Background(), pc)
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		c, err := NewClient(pool, Config{Concurrency: tc.concurrency, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		pool.Close()
		got := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "MaxConns")
		if got != tc.warn {
			t.Errorf("MaxConns %d, Concurrency %d: warned %v, want %v; log %q", tc.maxConns, tc.concurrency, got, tc.warn, logs.String())
		}
	}
}
