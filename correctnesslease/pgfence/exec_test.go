package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
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

// TestExecCommitUnknown: the connection is cut while Exec's COMMIT is in flight —
// in even trials before the server sees it (nothing committed), in odd trials once
// the commit is visible on the server while its answer is held in the proxy
// (committed). Exec cannot know which: it must say so with ErrCommitUnknown in
// both cases, and a read-back resolves each. A COMMIT the server refuses is a
// definite failure, not an unknown one.
func TestExecCommitUnknown(t *testing.T) {
	rep := coordtest.NewResult(t, "connection cut during pgfence.Exec's COMMIT",
		coordtest.Faults("connections cut while COMMIT was in flight"))
	defer coordtest.Report(t, rep)
	f, db, _ := newFence(t, pgfence.Config{Logger: quietLogger()})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE charges (id text PRIMARY KEY);
		CREATE TABLE once (v int, CONSTRAINT once_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	pool, proxy := coordtest.ProxiedPool(t, db, 1)
	committed := func(id string) bool {
		var n int
		if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM charges WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	trials := coordtest.Pick(10, 40)
	const delay = 150 * time.Millisecond
	var unknownLanded, unknownLost, late int
	for i := range trials {
		id := "charge-" + strconv.Itoa(i)
		afterCommit := i%2 == 1
		cut := make(chan struct{})
		cutsBefore := proxy.Stats().Cut
		ran := false
		err := f.Exec(ctx, pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
			ran = true
			if _, err := tx.Exec(ctx, "INSERT INTO charges VALUES ($1)", id); err != nil {
				return err
			}
			proxy.Delay(delay) // the COMMIT that follows is held in the proxy
			go func() {
				defer close(cut)
				if !afterCommit {
					time.Sleep(delay / 3)
					proxy.Cut()
					return
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !committed(id); {
					time.Sleep(time.Millisecond)
				}
				proxy.Cut()
			}()
			return nil
		})
		if !ran {
			t.Fatalf("trial %d: Exec returned %v before fn ran: no cutter started", i, err)
		}
		coordtest.Recv(t, cut, 30*time.Second, fmt.Sprintf("trial %d: the cut during COMMIT (Exec returned %v)", i, err))
		proxy.Heal()
		// An Exec answered before the cut (late, below) left the cut connection
		// idle in the pool, where pgx has not seen it close: the next trial's
		// BEGIN would fail on it. Every trial starts on a fresh connection.
		pool.Reset()
		if proxy.Stats().Cut == cutsBefore {
			t.Fatalf("trial %d: the proxy cut nothing", i)
		}
		landed := committed(id)
		switch {
		case err == nil:
			late++ // the answer beat the cut (a very busy machine): no fault this trial
			if !landed {
				t.Fatalf("trial %d: Exec succeeded but nothing committed", i)
			}
		case !errors.Is(err, pgfence.ErrCommitUnknown) || coord.Retryable(err):
			t.Fatalf("trial %d (cut %s the commit, committed: %v): Exec = %v, want ErrCommitUnknown (not coord.Retryable)", i, map[bool]string{false: "before", true: "after"}[afterCommit], landed, err)
		case landed:
			unknownLanded++
		default:
			unknownLost++
		}
		if landed != afterCommit && err != nil {
			t.Fatalf("trial %d: committed %v, but the cut was %s the commit", i, landed, map[bool]string{false: "before", true: "after"}[afterCommit])
		}
	}

	// A COMMIT the server refuses (a deferred unique constraint) is known: failed.
	err := f.Exec(ctx, db.Pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO once VALUES (1), (1)")
		return err
	})
	if err == nil || errors.Is(err, pgfence.ErrCommitUnknown) {
		t.Fatalf("Exec whose COMMIT the server refused = %v, want a definite error", err)
	}
	// So is a COMMIT never sent because ctx ended before it.
	cctx, cancel := context.WithCancel(ctx)
	err = f.Exec(cctx, db.Pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(cctx, "INSERT INTO charges VALUES ('cancelled')")
		cancel()
		return err
	})
	if err == nil || errors.Is(err, pgfence.ErrCommitUnknown) || committed("cancelled") {
		t.Fatalf("Exec whose ctx ended before COMMIT = %v (committed %v), want a definite failure", err, committed("cancelled"))
	}

	st := proxy.Stats()
	t.Logf("%d trials: %d connections cut; ErrCommitUnknown with the commit landed %d, not landed %d; answered before the cut %d",
		trials, st.Cut, unknownLanded, unknownLost, late)
	rep.Trials = trials
	rep.Faults["connections cut while COMMIT was in flight"] = st.Cut
	rep.Outcome["ErrCommitUnknown, committed (read back)"] = int64(unknownLanded)
	rep.Outcome["ErrCommitUnknown, not committed (read back)"] = int64(unknownLost)
	rep.Outcome["answered before the cut"] = int64(late)
	rep.Notes = fmt.Sprintf("even trials cut before the server sees COMMIT, odd trials after it committed while the answer is held (proxy delay %v)", delay)
	if unknownLanded == 0 || unknownLost == 0 {
		t.Fatalf("the fault did not produce both outcomes: committed %d, not committed %d", unknownLanded, unknownLost)
	}
}
