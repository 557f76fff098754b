package pgfence_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// TestExecRollsBackWhenFnPanics: a panicking fn must not leave its transaction
// open. The fence row stays locked until the transaction ends, so a leaked
// transaction would block every later holder of the lease.
func TestExecRollsBackWhenFnPanics(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("fn's panic did not reach the caller")
			}
		}()
		_ = f.Exec(ctx, db.Pool, tok(t, "/p@10"), func(context.Context, pgx.Tx) error { panic("boom") })
	}()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := f.Exec(wctx, db.Pool, tok(t, "/p@11"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("the next holder's Exec = %v: the panicked transaction still holds the fence row", err)
	}
}
