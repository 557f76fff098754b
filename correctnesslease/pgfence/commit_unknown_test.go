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
		err := f.Exec(ctx, pool, tok(t, "/tenants/t/elections/billing@5"), func(ctx context.Context, tx pgx.Tx) error {
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
		coordtest.Recv(t, cut, 30*time.Second, fmt.Sprintf("trial %d: the cut during COMMIT (Exec returned %v; did fn run?)", i, err))
		proxy.Heal()
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
