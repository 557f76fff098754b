package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// BenchmarkSaga measures durable saga steps per second (b.N = steps) with one and
// two runners, and the per-step overhead against one single-row Postgres commit
// measured in the same run, on the same server:
//
//	cd bench && go test -run '^$' -bench 'Saga' -benchtime 2000x .
//
// Steps do nothing, so the figures are the runtime's own cost: a claim per saga
// (amortised over a batch) and one fenced UPDATE per step.
//
//   - overhead: one runner driving one saga at a time, so every step is one
//     sequential round of the runtime; step/commit = ns per step ÷ ns per
//     single-row commit, the commits being issued sequentially by a probe during
//     the same interval (target ≤ 1.5). commits/step counts the runner's write
//     transactions (claims included) per step.
//   - runners=1, runners=2: Concurrency 32 per runner; steps/s (target ≥ 1,000
//     with two runners).
func BenchmarkSaga(b *testing.B) {
	db := coordtest.Postgres(b)
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 40
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	migrator, err := saga.NewClient(pool, saga.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer migrator.Close()
	if err := migrator.Migrate(ctx, pool); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS saga_bench_commit (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name                 string
		runners, concurrency int
	}{{"overhead", 1, 1}, {"runners=1", 1, 32}, {"runners=2", 2, 32}} {
		b.Run(bc.name, func(b *testing.B) {
			b.StopTimer() // only the runners' work is timed
			stepNs, commitNs, perStep := sagaBenchRun(b, pool, bc.runners, bc.concurrency)
			b.ReportMetric(1e9/stepNs, "steps/s")
			b.ReportMetric(commitNs, "commit_ns")
			b.ReportMetric(stepNs/commitNs, "step/commit")
			b.ReportMetric(perStep, "commits/step")
		})
	}
}

const sagaBenchSteps = 5

type sagaBenchData struct {
	N int `json:"n"`
}

// sagaBenchProbe issues sequential single-row commits until stop is closed and
// returns their mean latency: the commit baseline, measured at the same time as
// the saga steps, under the same load of this busy shared machine.
func sagaBenchProbe(pool *pgxpool.Pool, stop <-chan struct{}, out chan<- float64) {
	ctx := context.Background()
	var n int
	var total time.Duration
	for {
		select {
		case <-stop:
			if n == 0 {
				out <- 0
				return
			}
			out <- float64(total.Nanoseconds()) / float64(n)
			return
		default:
		}
		t0 := time.Now()
		if _, err := pool.Exec(ctx, `INSERT INTO saga_bench_commit (v) VALUES ($1)`, fmt.Sprint(n)); err != nil {
			out <- 0
			return
		}
		total += time.Since(t0)
		n++
	}
}

// sagaBenchRun starts ceil(b.N/5) five-step sagas (untimed), then times the
// runners driving them all to completion while a probe measures single-row
// commits. It returns ns per step, ns per probe commit and commits per step.
func sagaBenchRun(b *testing.B, pool *pgxpool.Pool, runners, concurrency int) (float64, float64, float64) {
	b.Helper()
	ctx := context.Background()
	noop := func(context.Context, saga.StepContext, *sagaBenchData) error { return nil }
	def, err := saga.New("bench",
		saga.Compensatable("a", noop, noop),
		saga.Compensatable("b", noop, noop),
		saga.Pivot("c", noop),
		saga.Retriable("d", noop),
		saga.Retriable("e", noop),
	)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var clients []*saga.Client
	for range runners {
		c, err := saga.NewClient(pool, saga.Config{Concurrency: concurrency, PollInterval: 20 * time.Millisecond,
			Backoff: coord.Backoff{Base: time.Millisecond, Cap: 10 * time.Millisecond}, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if err := c.Register(def); err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
	}
	if _, err := pool.Exec(ctx, `TRUNCATE coord_sagas`); err != nil {
		b.Fatal(err)
	}
	sagas := (b.N + sagaBenchSteps - 1) / sagaBenchSteps
	for i := range sagas {
		if _, err := saga.Start(ctx, clients[0], def, sagaBenchData{N: i}, nil); err != nil {
			b.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	probeStop, probe := make(chan struct{}), make(chan float64, 1)
	go sagaBenchProbe(pool, probeStop, probe)
	b.StartTimer()
	start := time.Now()
	for _, c := range clients {
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(runCtx) }()
	}
	for {
		var left int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM coord_sagas WHERE state <> 'completed'`).Scan(&left); err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	close(probeStop)
	commitNs := <-probe
	if commitNs == 0 {
		b.Fatal("commit probe failed")
	}
	stop()
	wg.Wait()
	var steps, commits int64
	for _, c := range clients {
		s := c.Stats()
		steps += s.Steps
		commits += s.Commits
	}
	if steps != int64(sagas*sagaBenchSteps) {
		b.Fatalf("steps %d, want %d", steps, sagas*sagaBenchSteps)
	}
	return float64(elapsed.Nanoseconds()) / float64(steps), commitNs, float64(commits) / float64(steps)
}
