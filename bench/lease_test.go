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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// These benchmarks compare correctnesslease with go.etcd.io/etcd/client/v3/concurrency
// and with the minimal fenced lock one would write by hand, on one embedded etcd,
// interleaved operation by operation so the busy machine affects all alike.
//
//	cd bench && go test -run '^$' -bench 'Lease' -benchtime 20x -timeout 30m .

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
	es := leaseEtcdSession(b, cli, 15)
	ours := leaseSession(b, cli, "bench", 15*time.Second)
	fencedKey := "/tenants/bench/locks/fenced"
	mutex := concurrency.NewMutex(es, "/tenants/bench/elections/mutex")
	election := concurrency.NewElection(es, "/tenants/bench/elections/election")

	var fenced, queued, mu, el, acq []time.Duration
	for b.Loop() {
		for range leaseRounds {
			leaseRound(b, cli, es, ours, fencedKey, mutex, election, &fenced, &mu, &el, &acq)
			queued = append(queued, queueShapedLock(b, cli, es))
		}
	}
	b.ReportMetric(leaseMs(leaseP50(queued)), "queuetxn-p50-ms")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(queued)), "acquire/queuetxn")
	b.ReportMetric(leaseMs(leaseP50(fenced)), "fencedtxn-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(mu)), "mutex-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(el)), "election-p50-ms")
	b.ReportMetric(leaseMs(leaseP50(acq)), "acquire-p50-ms")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(fenced)), "acquire/fencedtxn")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(el)), "acquire/election")
	b.ReportMetric(float64(leaseP50(acq))/float64(leaseP50(mu)), "acquire/mutex")
	b.ReportMetric(float64(len(acq)), "samples")
}

// queueShapedLock times, by hand, the two transactions correctnesslease's
// Acquire and Release send: the queue transaction (put-if-absent guarded by the
// session's member key, reading the two newest keys of the queue: FIFO needs
// the predecessor, the guard fences an outcome left unknown) and the guarded
// delete. Against it Acquire+Release measures the SDK's own overhead; against
// the minimal fenced lock, what the protocol's extra compare and read cost.
func queueShapedLock(b *testing.B, cli *clientv3.Client, es *concurrency.Session) time.Duration {
	ctx := context.Background()
	const prefix, member = "/tenants/bench/elections/queued", "/tenants/bench/members/queued"
	key := prefix + "/" + strconv.FormatInt(int64(es.Lease()), 16)
	g, err := cli.Put(ctx, member, "", clientv3.WithLease(es.Lease()))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	r, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.ModRevision(member), "=", g.Header.Revision)).
		Then(clientv3.OpPut(key, "", clientv3.WithLease(es.Lease())),
			clientv3.OpGet(prefix+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))).
		Commit()
	if err != nil || !r.Succeeded {
		b.Fatalf("queue-shaped lock: %v %v", r, err)
	}
	if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", r.Header.Revision)).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// leaseRounds is the number of interleaved rounds per benchmark iteration, so
// that -benchtime 20x gives 1,000 samples per variant.
const leaseRounds = 50

// leaseRound times one acquire+release of each variant.
func leaseRound(b *testing.B, cli *clientv3.Client, es *concurrency.Session, ours *correctnesslease.Session,
	fencedKey string, mutex *concurrency.Mutex, election *concurrency.Election, fenced, mu, el, acq *[]time.Duration) {
	ctx := context.Background()
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
	*fenced = append(*fenced, time.Since(t0))

	t0 = time.Now()
	if err := mutex.Lock(ctx); err != nil {
		b.Fatal(err)
	}
	if err := mutex.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	*mu = append(*mu, time.Since(t0))

	t0 = time.Now()
	if err := election.Campaign(ctx, "v"); err != nil {
		b.Fatal(err)
	}
	if err := election.Resign(ctx); err != nil {
		b.Fatal(err)
	}
	*el = append(*el, time.Since(t0))

	t0 = time.Now()
	l, err := correctnesslease.Acquire(ctx, ours, "lease")
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		b.Fatal(err)
	}
	*acq = append(*acq, time.Since(t0))
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

// leaseChildEnv carries "endpoint|variant|name|ttlSeconds" to the holder child.
const leaseChildEnv = "COORDKIT_BENCH_LEASE_HOLDER"

// children are the processes the bench binary plays, re-executed by startChild
// with env set to their spec: the schedulers of BenchmarkSchedule, the member
// process of BenchmarkOwnershipTakeover, the producers of BenchmarkOutboxLag and
// the holder process of BenchmarkLeaseFailover.
var children = []struct {
	env, what string
	run       func(spec string) error
}{
	{schedChildEnv, "schedule child", schedChild},
	{ownChildEnv, "ownership takeover child", ownTakeoverChild},
	{outboxProducerEnv, "outbox producer child", outboxProducerChild},
	{leaseChildEnv, "lease failover child", leaseFailoverChild},
}

// TestMain runs the child whose env is set instead of tests.
func TestMain(m *testing.M) {
	for _, c := range children {
		if spec := os.Getenv(c.env); spec != "" {
			if err := c.run(spec); err != nil {
				fmt.Fprintln(os.Stderr, c.what+":", err)
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// startChild re-executes the bench binary with env ("NAME=spec", one of
// children) added, its stderr ours, and returns the running child and its
// stdout. The caller waits for it, or kills and reaps it.
func startChild(b *testing.B, env string) (*exec.Cmd, io.ReadCloser) {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return cmd, out
}

// leaseFailoverChild takes the lease named in spec, prints HELD and waits to be
// frozen and killed.
func leaseFailoverChild(spec string) error {
	parts := strings.Split(spec, "|")
	endpoint, variant, name := parts[0], parts[1], parts[2]
	var ttl int
	fmt.Sscan(parts[3], &ttl)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch variant {
	case "coordkit":
		s, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "bench", TTL: time.Duration(ttl) * time.Second, Logger: leaseQuiet})
		if err != nil {
			return err
		}
		if _, err := correctnesslease.Acquire(ctx, s, name); err != nil {
			return err
		}
	case "etcd":
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl))
		if err != nil {
			return err
		}
		if err := concurrency.NewElection(s, "/tenants/bench/elections/"+name).Campaign(ctx, "holder"); err != nil {
			return err
		}
	}
	fmt.Println("HELD")
	select {}
}

// BenchmarkLeaseFailover: a holder runs in a child process; a standby in this
// process waits for the same name; the child is SIGSTOPped and we time until the
// standby holds the lease. One trial per variant per iteration (TTL 5 s), so run
// it with -benchtime 20x for the median of 20.
func BenchmarkLeaseFailover(b *testing.B) {
	const ttl = 5
	e := coordtest.Etcd(b)
	cli := e.Client(b)
	ours := leaseSession(b, cli, "bench", ttl*time.Second)
	theirs := leaseEtcdSession(b, cli, ttl)
	trial := func(variant string, n int) time.Duration {
		name := fmt.Sprintf("failover-%s-%d", variant, n)
		cmd, out := startChild(b, fmt.Sprintf("%s=%s|%s|%s|%d", leaseChildEnv, e.Endpoints[0], variant, name, ttl))
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "HELD" {
			b.Fatalf("child: %q %v", line, err)
		}
		got := make(chan time.Time, 1)
		go func() {
			var err error
			if variant == "coordkit" {
				var l *correctnesslease.Lease
				if l, err = correctnesslease.Acquire(context.Background(), ours, name); err == nil {
					got <- time.Now()
					_ = l.Release(context.Background())
					return
				}
			} else {
				el := concurrency.NewElection(theirs, "/tenants/bench/elections/"+name)
				if err = el.Campaign(context.Background(), "standby"); err == nil {
					got <- time.Now()
					_ = el.Resign(context.Background())
					return
				}
			}
			b.Error(err)
			got <- time.Time{}
		}()
		// The standby is queued before the holder freezes.
		for {
			r, err := cli.Get(context.Background(), "/tenants/bench/elections/"+name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			if r.Count >= 2 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := syscall.Kill(cmd.Process.Pid, syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		frozen := time.Now()
		return (<-got).Sub(frozen)
	}
	var ourT, theirT []time.Duration
	n := 0
	for b.Loop() {
		n++
		ourT = append(ourT, trial("coordkit", n))
		theirT = append(theirT, trial("etcd", n))
	}
	b.ReportMetric(leaseMs(leaseP50(ourT))/1000, "coordkit-failover-p50-s")
	b.ReportMetric(leaseMs(leaseP50(theirT))/1000, "etcd-failover-p50-s")
	b.ReportMetric(float64(leaseP50(ourT))/float64(leaseP50(theirT)), "coordkit/etcd")
	b.ReportMetric(float64(len(ourT)), "trials")
	b.Logf("failover after SIGSTOP, TTL %ds: coordkit %v, etcd concurrency.Election %v", ttl, ourT, theirT)
}
