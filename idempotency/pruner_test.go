package idempotency_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
)

func TestPrunerDeletesExpiredCompletedKeysInBatches(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	for i := range 7 {
		key := idempotency.Key{Scope: "acme", ID: "k" + strconv.Itoa(i)}
		if _, err := s.Do(ctx, key, fp("a"), effect(key, "x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Five of them were created and completed 25 hours ago; one old key is still in progress (phased).
	if _, err := db.Pool.Exec(ctx, `UPDATE coord_idempotency_keys SET created_at = now() - interval '25 hours', completed_at = now() - interval '25 hours' WHERE idem_key IN ('k0','k1','k2','k3','k4')`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO coord_idempotency_keys (scope, idem_key, fingerprint, status, operation, locked_until, created_at)
		VALUES ('acme', 'old-in-progress', '\x00', 1, 'payment', now(), now() - interval '30 hours')`); err != nil {
		t.Fatal(err)
	}
	p, err := s.NewPruner(idempotency.PrunerConfig{Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.PruneOnce(ctx)
	if err != nil || n != 5 {
		t.Fatalf("pruned %d, %v; want 5", n, err)
	}
	var left int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM coord_idempotency_keys`).Scan(&left); err != nil || left != 3 {
		t.Fatalf("left %d, %v; want 3 (two fresh, one in progress)", left, err)
	}
	// Run stops on cancel.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Run(cctx); err != nil {
		t.Fatal(err)
	}
}

// Retention runs from completion: a phased key that stayed in progress for longer
// than Retention (its provider was down for a day) and completed just now is kept
// for Retention, so a client's retry still replays instead of running it again.
func TestPrunerKeepsAKeyForRetentionAfterItCompleted(t *testing.T) {
	s, db := newStore(t, idempotency.Config{})
	ctx := context.Background()
	key := idempotency.Key{Scope: "acme", ID: "day-long-outage"}
	providerUp := false
	op := &idempotency.Operation{Name: "charge", Phases: []idempotency.Phase{
		{Name: "call", External: func(context.Context, *idempotency.State) error {
			if !providerUp {
				return errors.New("provider unavailable")
			}
			return nil
		}},
		{Name: "finish", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			r, err := effect(key, "charged")(ctx, tx)
			st.Response = &r
			return err
		}},
	}}
	if _, err := s.Run(ctx, key, fp("a"), op, nil); err == nil {
		t.Fatal("Run succeeded against a provider that is down")
	}
	// The key has been in progress for 25 hours when the provider comes back.
	if _, err := db.Pool.Exec(ctx, `UPDATE coord_idempotency_keys SET created_at = now() - interval '25 hours' WHERE idem_key = $1`, key.ID); err != nil {
		t.Fatal(err)
	}
	providerUp = true
	if r, err := s.Run(ctx, key, fp("a"), op, nil); err != nil || r.Replayed {
		t.Fatalf("Run after the outage: %+v, %v", r, err)
	}
	p, err := s.NewPruner(idempotency.PrunerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := p.PruneOnce(ctx); err != nil || n != 0 {
		t.Fatalf("pruned %d keys (%v) completed a moment ago; want 0", n, err)
	}
	if r, err := s.Run(ctx, key, fp("a"), op, nil); err != nil || !r.Replayed {
		t.Fatalf("client's retry: %+v, %v; want the replay", r, err)
	}
	wantEffects(t, db, key, 1)
}
