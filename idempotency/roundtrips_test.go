package idempotency_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
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
