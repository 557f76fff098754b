package pgfence_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The network to the database goes silent while the fenced transaction is open
// and ctx ends: Exec's rollback must not wait for an answer that never comes.
// Exec returns soon after ctx (its rollback is bounded), instead of blocking the
// holder — and its step-down — until TCP gives up (about 15 minutes). IdleTimeout
// is off: the server ending the session would reach the client through the proxy
// as a close, which a real partition does not deliver.
func TestExecReturnsWhenTheNetworkIsSilent(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger(), IdleTimeout: -1})
	pool, proxy := coordtest.ProxiedPool(t, db, 1)
	ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	done := make(chan error, 1)
	go func() {
		done <- f.Exec(ctx, pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
			proxy.Blackhole() // from here on the database answers nothing
			<-ctx.Done()
			return ctx.Err()
		})
	}()
	const bound = 30 * time.Second // pgtx.RollbackTimeout (5s) and then some, on a loaded machine
	select {
	case err := <-done:
		t.Logf("Exec returned %v after ctx's deadline", time.Since(deadline))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Exec = %v, want fn's context.DeadlineExceeded", err)
		}
	case <-time.After(bound):
		proxy.Cut() // free the blocked rollback, so the test ends
		<-done
		t.Fatalf("Exec still blocked %v after its ctx ended: its rollback waits without bound on a silent network", bound)
	}
	if st := proxy.Stats(); st.Blackholes != 1 || st.DroppedBytes == 0 {
		t.Fatalf("proxy %+v: the rollback was not swallowed by a silent network", st)
	}
	proxy.Cut() // the server side of the dead connection: end its transaction now
}
