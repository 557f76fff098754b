package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestRoundTripsOfDoAndDoTx holds the round trips of each path, counted on the
// wire (coordtest.RoundTrips), against the bare effect transaction (BEGIN; one
// INSERT; COMMIT: 3). Do on a new key makes the bare transaction's three — the
// claim goes with BEGIN, the key row with COMMIT —; a replay costs one while the
// Store sees mostly replays (it looks the key up first) and two when it claims
// first (the read, then ROLLBACK); DoTx adds its claim and its key row to the
// caller's transaction. A change that adds a round trip fails here.
func TestRoundTripsOfDoAndDoTx(t *testing.T) {
	_, db := newStore(t, idempotency.Config{})
	pool, rt := db.CountingPool(t, 1)
	s, err := idempotency.New(pool, idempotency.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	newKey := func() idempotency.Key { n++; return idempotency.Key{Scope: "rt", ID: "k" + strconv.Itoa(n)} }
	done := idempotency.Key{Scope: "rt", ID: "done"}
	if _, err := s.Do(ctx, done, fp("a"), effect(done, "x"), nil); err != nil {
		t.Fatal(err)
	}
	bare := func() error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects (scope, key, note) VALUES ('rt', 'bare', '')`)
			return err
		})
	}
	assumeNew := &idempotency.DoOpts{AssumeNew: true}
	doNew := func() error { k := newKey(); _, err := s.Do(ctx, k, fp("a"), effect(k, "x"), assumeNew); return err }
	replay := func(o *idempotency.DoOpts) func() error {
		return func() error { _, err := s.Do(ctx, done, fp("a"), effect(done, "again"), o); return err }
	}
	doTx := func(k func() idempotency.Key) func() error {
		return func() error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				key := k()
				_, err := s.DoTx(ctx, tx, key, fp("a"), effect(key, "x"), nil)
				return err
			})
		}
	}
	for _, c := range []struct {
		name string
		want float64
		op   func() error
	}{
		{"bare: BEGIN; INSERT; COMMIT", 3, bare},
		{"Do, new key", 3, doNew},
		{"Do, replay, claiming first (AssumeNew)", 2, replay(assumeNew)},
		{"Do, replay, looking up first (after replays)", 1, replay(nil)},
		{"BEGIN; DoTx, new key; COMMIT", 5, doTx(newKey)},
		{"BEGIN; DoTx, replay; COMMIT", 3, doTx(func() idempotency.Key { return done })},
	} {
		for range 20 { // prepare the statements; let the Store's plan follow what it sees
			if err := c.op(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		got, err := rt.Of(10, c.op)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: %.1f round trips", c.name, got)
		if got != c.want {
			t.Errorf("%s: %.1f round trips, want %.0f", c.name, got, c.want)
		}
	}
}

// Do sends the key row with COMMIT, in one round trip. What the server answered
// to each of them stays known: a key row the server refuses (here a trigger)
// means COMMIT never ran — a definite failure with the server's error, the effect
// rolled back, the key free for a retry — never ErrCommitUnknown.
func TestDoKeyRowRefusedIsNotUnknown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, `CREATE FUNCTION refuse_key() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.idem_key = 'refused' THEN RAISE EXCEPTION 'key refused' USING ERRCODE = 'P0001'; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_key BEFORE INSERT ON coord_idempotency_keys FOR EACH ROW EXECUTE FUNCTION refuse_key()`); err != nil {
		t.Fatal(err)
	}
	key := idempotency.Key{Scope: "acme", ID: "refused"}
	for _, o := range []*idempotency.DoOpts{nil, {AssumeNew: true}} {
		_, err := s.Do(ctx, key, fp("a"), effect(key, "x"), o)
		var pgErr *pgconn.PgError
		if errors.Is(err, idempotency.ErrCommitUnknown) || !errors.As(err, &pgErr) || pgErr.Code != "P0001" {
			t.Fatalf("Do whose key row the server refused = %v, want the trigger's error, not ErrCommitUnknown", err)
		}
		if n := effectCount(t, db, key); n != 0 {
			t.Fatalf("%d effects committed with a refused key row", n)
		}
	}
}

// A context that ends while fn runs (fn returns nil regardless) is seen before
// the key row and COMMIT go out: nothing was sent, nothing committed — Do
// returns the context's error, not ErrCommitUnknown, and a retry runs the effect.
func TestDoContextEndedBeforeCommitIsNotUnknown(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	key := idempotency.Key{Scope: "acme", ID: "cancelled-before-commit"}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := s.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		r, err := effect(key, "cancelled")(ctx, tx)
		cancel()
		return r, err
	}, &idempotency.DoOpts{AssumeNew: true})
	if errors.Is(err, idempotency.ErrCommitUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Do whose context ended before COMMIT = %v, want context.Canceled, not ErrCommitUnknown", err)
	}
	failedBeforeCommit(t, s, db, key, "after the context ended before COMMIT")
}

// failedBeforeCommit checks what a Do of key that failed before COMMIT, as said
// by when, left: no effect, and a key whose retry runs the effect.
func failedBeforeCommit(t *testing.T, s *idempotency.Store, db *coordtest.PostgresDB, key idempotency.Key, when string) {
	t.Helper()
	if n := effectCount(t, db, key); n != 0 {
		t.Fatalf("%d effects committed %s", n, when)
	}
	res, err := s.Do(context.Background(), key, fp("a"), effect(key, "retry"), nil)
	if err != nil || res.Replayed {
		t.Fatalf("retry: %+v, %v, want the effect run", res, err)
	}
}
