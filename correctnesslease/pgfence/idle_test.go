package pgfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// TestIdleTransactionEndedIsRetryable: a fenced transaction left idle longer
// than IdleTimeout — its process frozen, or starved of CPU — is ended by
// PostgreSQL, as designed, and nothing it wrote commits. Exec says so with a
// typed, retryable error whichever statement met the end (before, the
// database's 25P03 or a closed connection came back bare: a successor starved
// for 0.7 s on a loaded CI machine failed TestSuccessorNotBlockedByHolderFrozenInTx
// instead of retrying).
func TestIdleTransactionEndedIsRetryable(t *testing.T) {
	const idle = 200 * time.Millisecond
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger(), IdleTimeout: idle})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE charges (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{"statement", "commit"} {
		id := "charge-idle-before-" + after
		err := f.Exec(ctx, db.Pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
			if err := insertInto("charges", id)(ctx, tx); err != nil {
				return err
			}
			time.Sleep(5 * idle) // idle in the transaction: PostgreSQL ends it
			if after == "statement" {
				return insertInto("charges", id+"-2")(ctx, tx)
			}
			return nil
		})
		var ie *pgfence.IdleError
		if !errors.Is(err, pgfence.ErrIdleTimeout) || !errors.As(err, &ie) || ie.IdleTimeout != idle || !coord.Retryable(err) {
			t.Fatalf("idle before the %s: Exec = %v (%T): want a retryable *pgfence.IdleError matching ErrIdleTimeout, IdleTimeout %v", after, err, err, idle)
		}
		var n int
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM charges`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("idle before the %s: %d rows committed (%v): want none", after, n, err)
		}
	}
	// Work that fails on its own keeps its error.
	own := errors.New("card declined")
	if err := f.Exec(ctx, db.Pool, tok(t, "/tenants/t/elections/billing@5"), func(context.Context, pgx.Tx) error { return own }); !errors.Is(err, own) || errors.Is(err, pgfence.ErrIdleTimeout) {
		t.Fatalf("fn's own error: Exec = %v", err)
	}
}
