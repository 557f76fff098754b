package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// frozenIdleTimeout is the frozen holder's IdleTimeout. Longer than the default
// (TTL/3 = 667 ms at MinTTL): its transactions must stay open from their last
// statement until the parent has checked and SIGSTOPped it, which on a loaded
// 2-core machine took longer than 667 ms ("6 holder backends idle in
// transaction, want 10").
func frozenIdleTimeout(ttl time.Duration) time.Duration { return ttl }

// frozenBackends counts the holder's backends that are idle inside a transaction.
func frozenBackends(ctx context.Context, t *testing.T, db *coordtest.PostgresDB, app string) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'idle in transaction'`, app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSuccessorNotBlockedByHolderFrozenInTx: the holder (a child process) is
// SIGSTOPped *inside* its fenced transactions — GuardTx done, a row written, not
// committed — and stays frozen past its TTL. The fence rows stay locked by those
// transactions, so without a bound the successor's first fenced write waits for as
// long as the pause lasts. With GuardTx's transaction-local
// idle_in_transaction_session_timeout PostgreSQL ends the frozen transactions, and
// the successor's lock_timeout bounds its own wait: its first fenced write (retried
// only on the retryable *pgfence.BusyError and *pgfence.IdleError) must commit within TTL + IdleTimeout + LockTimeout
// of the pause (plus slack for a loaded machine) while the holder is still frozen,
// and the frozen transactions must never commit after it.
func TestSuccessorNotBlockedByHolderFrozenInTx(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "holder SIGSTOPped inside its fenced transaction: the successor's first write commits within a bound",
		coordtest.Faults("holder SIGSTOPped inside its fenced transactions past the TTL"))
	defer coordtest.Report(t, res)
	const ttl, perRound = correctnesslease.MinTTL, 10
	rounds := coordtest.Pick(3, 20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*30*time.Second)
	defer cancel()
	w := newHolderWorld(ctx, t, pgfence.Config{Logger: quietLogger(), LeaseTTL: ttl},
		correctnesslease.Config{Tenant: "frozen-tx", TTL: 10 * time.Second, Logger: quietLogger()}, "pgfence-frozen-tx", ttl)
	db, f, h, app := w.db, w.f, w.h, w.app

	// The bound the successor's first write must meet, measured from the pause:
	// the holder's lease expires, PostgreSQL ends its idle transactions, and the
	// successor's guard waits at most its own LockTimeout (the default, TTL/3).
	idle, lock := frozenIdleTimeout(ttl), ttl/3
	bound := ttl + idle + lock
	slack := 3 * time.Second // etcd's expiry scan (500 ms) and a loaded 2-core machine
	var waits []time.Duration
	var busy, idled, frozenCommitted, frozenFailed int
	for r := range rounds {
		names := roundNames("frozen", r, perRound)
		held := h.hold(t, "intx", "intx", names)
		// The fault: the holder is frozen inside its open, fenced transactions.
		if n := frozenBackends(ctx, t, db, app); n != perRound {
			t.Fatalf("round %d: %d holder backends idle in transaction, want %d", r, n, perRound)
		}
		paused := h.stop(t)
		var mu sync.Mutex
		w.rivalsWrite(ctx, t, names, held, "the successors writing while the holder is frozen in its transactions", func(l *correctnesslease.Lease, n string) error {
			wctx, cancel := context.WithDeadline(ctx, paused.Add(bound+slack))
			defer cancel()
			for attempt := 0; ; attempt++ {
				err := zombieWrite(wctx, f, db.Pool, l.Token(), n, "rival")
				// Busy: the frozen holder still has the row. Idle: this successor,
				// starved on a loaded machine, sat idle in its own transaction for
				// IdleTimeout and PostgreSQL ended it, as it ends the holder's.
				var be *pgfence.BusyError
				var ie *pgfence.IdleError
				if (errors.As(err, &be) && errors.Is(err, pgfence.ErrBusy)) || (errors.As(err, &ie) && errors.Is(err, pgfence.ErrIdleTimeout)) {
					if !coord.Retryable(err) {
						return fmt.Errorf("successor's write to %s: %w: not retryable", n, err)
					}
					mu.Lock()
					if be != nil {
						busy++
					} else {
						idled++
					}
					mu.Unlock()
					_ = coord.Backoff{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}.Wait(wctx, nil, attempt)
					continue
				}
				if err != nil {
					return fmt.Errorf("successor's first write to %s, %v after the pause: %w", n, time.Since(paused).Round(time.Millisecond), err)
				}
				break
			}
			mu.Lock()
			waits = append(waits, time.Since(paused))
			mu.Unlock()
			return nil
		})
		// The successors did not wait for the pause to end, and PostgreSQL ended
		// the frozen transactions.
		if st, err := coordtest.ProcessState(h.cmd.Process.Pid); err != nil || st != 'T' {
			t.Fatalf("round %d: holder state %q (%v) after the successors wrote, want T (still frozen)", r, st, err)
		}
		// The ended backend releases its locks before it leaves pg_stat_activity.
		for deadline := time.Now().Add(10 * time.Second); frozenBackends(ctx, t, db, app) != 0; {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d frozen transactions still open 10 s after the successors committed", r, frozenBackends(ctx, t, db, app))
			}
			time.Sleep(10 * time.Millisecond)
		}
		res.Faults["holder SIGSTOPped inside its fenced transactions past the TTL"]++
		res.Outcome["frozen transactions"] += perRound
		if err := syscall.Kill(h.cmd.Process.Pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		for {
			cmd, args := h.next(t)
			if cmd == "done" {
				break
			}
			if cmd != "commit" {
				t.Fatalf("holder said %s %v", cmd, args)
			}
			if args[1] == "ok" {
				frozenCommitted++
				t.Errorf("round %d: the frozen transaction of %s committed after its successor", r, args[0])
			} else {
				frozenFailed++
			}
		}
	}
	var frozenRows, rivalRows int
	if err := db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM writes WHERE writer = 'frozen'),
		(SELECT count(*) FROM writes WHERE writer = 'rival')`).Scan(&frozenRows, &rivalRows); err != nil {
		t.Fatal(err)
	}
	slices.Sort(waits)
	want := rounds * perRound
	res.Trials = want
	res.Outcome["successor writes committed"] = int64(rivalRows)
	res.Outcome["successor BusyError retries"] = int64(busy)
	res.Outcome["successor IdleError retries"] = int64(idled)
	res.Outcome["frozen commits refused"] = int64(frozenFailed)
	res.Outcome["frozen rows committed"] = int64(frozenRows)
	res.Outcome["first write after pause, max ms"] = waits[len(waits)-1].Milliseconds()
	res.Outcome["first write after pause, median ms"] = waits[len(waits)/2].Milliseconds()
	res.Notes = fmt.Sprintf("%d rounds x %d leases, TTL %v, IdleTimeout %v, LockTimeout %v: bound TTL+idle+lock = %v (+%v slack)", rounds, perRound, ttl, idle, lock, bound, slack)
	t.Logf("%d trials: successor's first write committed %v..%v after the pause (median %v; bound %v + %v slack), %d BusyError and %d IdleError retries; frozen commits refused %d, frozen rows %d",
		want, waits[0].Round(time.Millisecond), waits[len(waits)-1].Round(time.Millisecond), waits[len(waits)/2].Round(time.Millisecond), bound, slack, busy, idled, frozenFailed, frozenRows)
	if rivalRows != want || len(waits) != want || frozenRows != 0 || frozenFailed != want {
		t.Fatalf("successor writes %d (timed %d), frozen rows %d, frozen commits refused %d; want %d, %d, 0, %d", rivalRows, len(waits), frozenRows, frozenFailed, want, want, want)
	}
}
