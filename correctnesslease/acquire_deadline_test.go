package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// queueLatency measures the median duration of an uncontended Acquire (one
// queue transaction) on s, releasing each lease.
func queueLatency(t *testing.T, s *Session) time.Duration {
	t.Helper()
	ctx := context.Background()
	var ds []time.Duration
	for i := range 40 {
		start := time.Now()
		l, err := Acquire(ctx, s, fmt.Sprintf("warm-%d", i))
		ds = append(ds, time.Since(start))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// electionKeys lists, directly in etcd, every key left under the tenant's
// elections.
func electionKeys(t *testing.T, cli *clientv3.Client, tenant string) []string {
	t.Helper()
	resp, err := cli.Get(context.Background(), "/tenants/"+tenant+"/elections/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// TestDeadlineMidQueueLeavesNoKey is the property of issue 15 point 1: an
// Acquire (TryAcquire, Run) whose context ends while its queue transaction is in
// flight must not leave its key behind. Deadlines are spread over 0.05x-2x the
// measured latency of the transaction, each call on its own name, so a key left
// by one call is never removed by the next; afterwards etcd is listed directly.
func TestDeadlineMidQueueLeavesNoKey(t *testing.T) {
	t.Parallel()
	calls := coordtest.Pick(1000, 5000)
	for _, kind := range []string{"Acquire", "TryAcquire", "Run"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			res := coordtest.NewResult(t, "deadline mid queue transaction leaves no key: "+kind,
				coordtest.Faults("deadline ended an unfinished queue transaction"))
			defer coordtest.Report(t, res)
			e := coordtest.Etcd(t)
			cli := e.Client(t)
			tenant := coordtest.Tenant(t)
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			s := newSession(t, cli, Config{Tenant: tenant, TTL: 10 * time.Second, Logger: quiet})
			lat := queueLatency(t, s)
			var failed, succeeded, midFlight int
			for i := range calls {
				d := time.Duration(float64(lat) * (0.05 + 1.95*float64(i%100)/99))
				name := fmt.Sprintf("p-%05d", i)
				ctx, cancel := context.WithTimeout(context.Background(), d)
				var err error
				switch kind {
				case "Acquire", "TryAcquire":
					var l *Lease
					if kind == "Acquire" {
						l, err = Acquire(ctx, s, name)
					} else {
						l, err = TryAcquire(ctx, s, name)
					}
					if err == nil {
						succeeded++
						if rerr := l.Release(context.Background()); rerr != nil {
							t.Fatalf("Release: %v", rerr)
						}
					}
				case "Run":
					ran := false
					err = Run(ctx, s, name, func(context.Context, coord.Token) error { ran = true; return nil }, nil)
					if ran {
						succeeded++
					}
				}
				cancel()
				if err != nil {
					// The deadline travels to etcd, which may answer "request
					// timed out" an instant before the client's timer fires.
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("call %d (deadline %v): %v, want one matching context.DeadlineExceeded", i, d, err)
					}
					failed++
				}
				if s.Err() != nil {
					t.Fatalf("session lost: %v", s.Err())
				}
			}
			midFlight = int(s.unknownQueues.Load())
			applied := s.fencedKeys.Load()
			left := electionKeys(t, cli, tenant)
			t.Logf("%s: %d calls, deadlines %v..%v (queue txn median %v): %d failed, %d held; %d queue transactions of unknown outcome, %d of them applied before their fence; keys left %d %v",
				kind, calls, time.Duration(float64(lat)*0.05), 2*lat, lat, failed, succeeded, midFlight, applied, len(left), left)
			res.Trials = calls
			res.Faults["deadline ended an unfinished queue transaction"] = midFlight
			res.Outcome["unknown outcomes that had applied (key deleted by the fence)"] = applied
			res.Outcome["calls failed by their deadline"] = int64(failed)
			res.Outcome["calls that held the lease"] = int64(succeeded)
			res.Outcome["keys left in etcd"] = int64(len(left))
			res.Notes = fmt.Sprintf("deadlines spread over 0.05x-2x the queue transaction's median latency %v", lat)
			if failed == 0 || succeeded == 0 {
				t.Fatalf("the deadlines did not straddle the transaction: %d failed, %d held", failed, succeeded)
			}
			if len(left) != 0 {
				t.Fatalf("%d keys left in etcd after calls that failed or released: %v", len(left), left)
			}
		})
	}
}
