package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Ambiguous commit: the connection is cut while COMMIT is in flight, so the client
// cannot know whether the effect committed. It retries with the same key: in every
// trial the effect happened exactly once.
func TestAmbiguousCommitRetryIsExactlyOnce(t *testing.T) {
	rep := coordtest.NewResult(t, "connection cut during COMMIT, retried with the same key", coordtest.Faults("connections cut while COMMIT was in flight"))
	defer coordtest.Report(t, rep)
	trials := coordtest.Pick(30, 120)
	direct, db := newStore(t, idempotency.Config{WaitTimeout: 500 * time.Millisecond})
	pool, proxy := coordtest.ProxiedPool(t, db, 1)
	viaProxy, err := idempotency.New(pool, idempotency.Config{WaitTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var unknown, landed, lost, late, cutsBefore int
	const hold = 150 * time.Millisecond // how long the proxy holds bytes in each direction
	for i := range trials {
		key := idempotency.Key{Scope: "acme", ID: "ambiguous-" + strconv.Itoa(i)}
		// Even trials: cut while the COMMIT sits in the proxy's delay, before the
		// server sees it. Odd trials: cut as soon as the commit is visible on the
		// server, while its answer is still held by the proxy.
		afterCommit := i%2 == 1
		cut := make(chan struct{})
		cutsBefore = proxy.Stats().Cut
		ran := false
		_, err := viaProxy.Do(ctx, key, fp("a"), func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			ran = true
			resp, err := effect(key, "x")(ctx, tx)
			proxy.Delay(2 * hold) // the COMMIT that follows, and its answer, are held in the proxy
			go func() {
				defer close(cut)
				if !afterCommit {
					time.Sleep(hold / 3)
					proxy.Cut()
					return
				}
				for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
					var n int
					if err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM effects WHERE scope = $1 AND key = $2`, key.Scope, key.ID).Scan(&n); err == nil && n > 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				proxy.Cut()
			}()
			return resp, err
		}, nil)
		if !ran {
			t.Fatalf("trial %d: Do returned %v before its effect ran: no cutter started", i, err)
		}
		coordtest.Recv(t, cut, 30*time.Second, fmt.Sprintf("trial %d: the cut during COMMIT (Do returned %v)", i, err))
		proxy.Heal()
		// A Do answered before the cut (late, below) left the cut connection
		// idle in the pool, where pgx has not seen it close: the next trial's
		// BEGIN would fail on it. Every trial starts on a fresh connection.
		pool.Reset()
		if proxy.Stats().Cut == cutsBefore {
			t.Fatalf("trial %d: the proxy cut nothing", i)
		}
		ambiguous := err != nil
		switch {
		case err == nil:
			late++ // the answer beat the cut (a very busy machine): no fault this trial
		case errors.Is(err, idempotency.ErrCommitUnknown):
			unknown++
			rep.Faults["connections cut while COMMIT was in flight"]++ // the client saw it: the outcome is unknown
		}
		// The client retries with the same key until it gets an answer.
		var res idempotency.Result
		for attempt := 0; ; attempt++ {
			res, err = direct.Do(ctx, key, fp("a"), effect(key, "retry"), nil)
			if !errors.Is(err, idempotency.ErrInFlight) || attempt > 20 {
				break
			}
			time.Sleep(100 * time.Millisecond) // the server has not yet noticed the cut
		}
		if err != nil {
			t.Fatalf("trial %d: retry: %v", i, err)
		}
		switch {
		case !ambiguous && !res.Replayed:
			t.Fatalf("trial %d: Do answered, but the retry did not replay", i)
		case !ambiguous:
		case res.Replayed:
			landed++
		default:
			lost++
		}
		if n := effectCount(t, db, key); n != 1 {
			t.Fatalf("trial %d: %d effects after retry, want exactly 1", i, n)
		}
		rep.Outcome["keys with exactly one effect"]++
	}
	st := proxy.Stats()
	t.Logf("%d trials: %d connections cut, %d ErrCommitUnknown, %d answered before the cut; retry replayed %d (commit had landed), executed %d (it had not)",
		trials, st.Cut, unknown, late, landed, lost)
	rep.Trials = trials
	rep.Outcome["ErrCommitUnknown"] = int64(unknown)
	rep.Outcome["answered before the cut"] = int64(late)
	rep.Outcome["retry replayed (commit had landed)"] = int64(landed)
	rep.Outcome["retry executed (commit had not landed)"] = int64(lost)
	rep.Notes = "the proxy holds each direction 150 ms; even trials cut before the server sees COMMIT, odd trials after it committed while the answer is held in the proxy; a cut counts when the client got ErrCommitUnknown"
	if unknown < trials*3/4 || landed == 0 {
		t.Fatalf("the fault did not produce both an unknown outcome and a landed commit: unknown %d, landed %d", unknown, landed)
	}
}
