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
//     sequential round of the runtime; step_ns / commit_ns is the overhead in
//     commits (target ≤ 1.5).
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
	if err := saga.Migrate(ctx, pool, &saga.MigrateOpts{BarrierTable: "-"}); err != nil {
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
			commitNs := sagaBenchCommit(b, pool, 300)
			stepNs, perStep := sagaBenchRun(b, pool, bc.runners, bc.concurrency)
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

// sagaBenchCommit returns the mean latency of n sequential single-row commits.
func sagaBenchCommit(b *testing.B, pool *pgxpool.Pool, n int) float64 {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for i := range n {
		if _, err := pool.Exec(ctx, `INSERT INTO saga_bench_commit (v) VALUES ($1)`, fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n)
}

// sagaBenchRun starts ceil(b.N/5) five-step sagas (untimed), then times the
// runners driving them all to completion. It returns ns per step and commits per
// step.
func sagaBenchRun(b *testing.B, pool *pgxpool.Pool, runners, concurrency int) (float64, float64) {
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
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
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
	return float64(elapsed.Nanoseconds()) / float64(steps), float64(commits) / float64(steps)
}
