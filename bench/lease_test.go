package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// These benchmarks compare correctnesslease with go.etcd.io/etcd/client/v3/concurrency
// and with the minimal fenced lock one would write by hand, on one embedded etcd,
// interleaved operation by operation so the busy machine affects all alike.
//
//	cd bench && go test -run '^$' -bench 'Lease' -benchtime 200x .

var leaseQuiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func leaseSession(b testing.TB, cli *clientv3.Client, tenant string, ttl time.Duration) *correctnesslease.Session {
	b.Helper()
	s, err := correctnesslease.NewSession(context.Background(), cli, correctnesslease.Config{Tenant: tenant, TTL: ttl, Logger: leaseQuiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func leaseEtcdSession(b testing.TB, cli *clientv3.Client, ttl int) *concurrency.Session {
	b.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func leaseP50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func leaseMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkLeaseAcquireRelease: one uncontended acquire + release per variant per
// iteration, interleaved. Reports each p50 and the ratios the issue targets.
func BenchmarkLeaseAcquireRelease(b *testing.B) {
	e := coordtest.Etcd(b)
	cli := e.Client(b)
	ctx := context.Background()
	es := leaseEtcdSession(b, cli, 15)
	ours := leaseSession(b, cli, "bench", 15*time.Second)

	fencedKey := "/tenants/bench/locks/fenced"
	mutex := concurrency.NewMutex(es, "/tenants/bench/elections/mutex")
	election := concurrency.NewElection(es, "/tenants/bench/elections/election")

	var fenced, mu, el, acq []time.Duration
	for b.Loop() {
		// Minimal fenced lock: put-if-absent with the lease, token = create
		// revision; delete guarded by that revision.
		t0 := time.Now()
		r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(fencedKey), "=", 0)).
			Then(clientv3.OpPut(fencedKey, "", clientv3.WithLease(es.Lease()))).Commit()
		if err != nil || !r.Succeeded {
			b.Fatalf("fenced lock: %v %v", r, err)
		}
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(fencedKey), "=", r.Header.Revision)).
			Then(clientv3.OpDelete(fencedKey)).Commit(); err != nil {
			b.Fatal(err)
		}
		fenced = append(fenced, time.Since(t0))

		t0 = time.Now()
		if err := mutex.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := mutex.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		mu = append(mu, time.Since(t0))

		t0 = time.Now()
		if err := election.Campaign(ctx, "v"); err != nil {
			b.Fatal(err)
		}
		if err := election.Resign(ctx); err != nil {
			b.Fatal(err)
		}
		el = append(el, time.Since(t0))

		t0 = time.Now()
		l, err := correctnesslease.Acquire(ctx, ours, "lease")
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		acq = append(acq, time.Since(t0))
	}
	b.ReportMetric(leaseMs(leaseP50(fenced)), "fencedtxn-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(mu)), "mutex-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(el)), "election-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(acq)), "acquire-p50-ms")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(fenced)), "acquire/fencedtxn")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(el)), "acquire/election")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(mu)), "acquire/mutex")
}

// BenchmarkLeaseContended16: 16 contenders, each with its own session, hand one
// name to each other as fast as they can: concurrency.Mutex and our Acquire,
// in alternating phases of 2 s (b.N phases each).
func BenchmarkLeaseContended16(b *testing.B) {
	const contenders = 16
	const phase = 2 * time.Second
	e := coordtest.Etcd(b)
	cli := e.Client(b)
	var esess []*concurrency.Session
	var osess []*correctnesslease.Session
	for range contenders {
		esess = append(esess, leaseEtcdSession(b, cli, 15))
		osess = append(osess, leaseSession(b, cli, "bench", 15*time.Second))
	}
	run := func(lockUnlock func(i int) error) float64 {
		var n atomic.Int64
		ctx, cancel := context.WithTimeout(context.Background(), phase)
		defer cancel()
		var wg sync.WaitGroup
		start := time.Now()
		for i := range contenders {
			wg.Go(func() {
				for ctx.Err() == nil {
					if err := lockUnlock(i); err != nil {
						if ctx.Err() == nil {
							b.Error(err)
						}
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(start).Seconds()
	}
	var mutexRate, oursRate []float64
	phaseN := 0
	for b.Loop() {
		phaseN++
		name := fmt.Sprintf("contended-%d", phaseN)
		mutexRate = append(mutexRate, run(func(i int) error {
			m := concurrency.NewMutex(esess[i], "/tenants/bench/elections/m-"+name)
			if err := m.Lock(context.Background()); err != nil {
				return err
			}
			return m.Unlock(context.Background())
		}))
		oursRate = append(oursRate, run(func(i int) error {
			l, err := correctnesslease.Acquire(context.Background(), osess[i], name)
			if err != nil {
				return err
			}
			return l.Release(context.Background())
		}))
	}
	mr, or := leaseMedian(mutexRate), leaseMedian(oursRate)
	b.ReportMetric(mr, "mutex-handoffs/s")
	b.ReportMetric(or, "acquire-handoffs/s")
	b.ReportMetric(or/mr, "acquire/mutex")
}

func leaseMedian(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

var _ = coord.Token{}
var _ = bufio.NewReader
var _ = exec.Command
var _ = os.Getenv
var _ = strings.TrimSpace
var _ = syscall.SIGSTOP
