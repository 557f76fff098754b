package idempotency_test

import (
	"context"
	"strconv"
	"testing"

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
	// Five of them are 25 hours old; one old key is still in progress (phased).
	if _, err := db.Pool.Exec(ctx, `UPDATE coord_idempotency_keys SET created_at = now() - interval '25 hours' WHERE idem_key IN ('k0','k1','k2','k3','k4')`); err != nil {
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
