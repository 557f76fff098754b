package schedule_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// exampleServers is a throw-away embedded etcd and a schema of its own on the
// test PostgreSQL, and a function that removes both.
func exampleServers() (*clientv3.Client, *pgxpool.Pool, func()) {
	cli, stopEtcd := coordtest.ExampleEtcd()
	pool, dropSchema := coordtest.ExamplePostgres()
	return cli, pool, func() { dropSchema(); stopEtcd() }
}

// A monthly billing job, declared in code and run by every replica: the
// owner of its partition fires it, and the invoice it writes commits with the
// fire's record in one fenced transaction, keyed by the fire's identity. Here
// an operator triggers a run at once instead of waiting for the 1st.
func Example() {
	etcd, pool, stop := exampleServers()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := pgfence.Migrate(ctx, pool); err != nil {
		fmt.Println("migrate fence:", err)
		return
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE invoices (fire_key text PRIMARY KEY, kind text NOT NULL)`); err != nil {
		fmt.Println("create:", err)
		return
	}
	// PollInterval: how soon the owner sees an operator's request (default 2 s).
	s, err := schedule.New(etcd, pool, schedule.Config{Tenant: "acme", Partitions: 4, PollInterval: 100 * time.Millisecond})
	if err != nil {
		fmt.Println("config:", err)
		return
	}
	if err := s.Migrate(ctx, pool); err != nil {
		fmt.Println("migrate:", err)
		return
	}
	err = s.Add(schedule.Job{Name: "billing", Cron: "0 9 1 * *", Zone: "Europe/Berlin",
		Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
			_, err := tx.Exec(ctx, `INSERT INTO invoices (fire_key, kind) VALUES ($1, $2)`, f.Key(), f.Kind)
			return err
		}})
	if err != nil {
		fmt.Println("add:", err)
		return
	}
	sess, err := correctnesslease.NewSession(ctx, etcd, correctnesslease.Config{Tenant: "acme", TTL: 3 * time.Second})
	if err != nil {
		fmt.Println("session:", err)
		return
	}
	defer sess.Close(context.WithoutCancel(ctx))
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- s.Run(runCtx, sess) }()
	defer func() { // Run leaves the group once its context ends
		stopRun()
		if err := <-ran; err != nil {
			fmt.Println("run:", err)
		}
	}()

	// The job's row appears once its partition's owner has registered it.
	var jobs []schedule.JobStatus
	for len(jobs) == 0 && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if jobs, err = s.List(ctx); err != nil {
			fmt.Println("list:", err)
			return
		}
	}
	fmt.Println("job:", jobs[0].Job, jobs[0].Cron, jobs[0].Zone, "next on the 1st at", jobs[0].Next.Local.Format("15:04"))

	if _, err := s.Trigger(ctx, "billing", "ops@acme", "invoice run for the late customers"); err != nil {
		fmt.Println("trigger:", err)
		return
	}
	var kind string
	for kind == "" && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if err := pool.QueryRow(ctx, `SELECT kind FROM invoices`).Scan(&kind); err != nil && err != pgx.ErrNoRows {
			fmt.Println("read:", err)
			return
		}
	}
	fmt.Println("invoice written by a", kind, "fire")
	// Output:
	// job: billing 0 9 1 * * Europe/Berlin next on the 1st at 09:00
	// invoice written by a manual fire
}

// The fires of a half-hourly New York job across the night the clocks go
// back: 01:00 and 01:30 happen twice, and FoldTwice fires both readings,
// fold 0 in daylight time and fold 1 in standard time.
func ExamplePreview() {
	fires, err := schedule.Preview(schedule.Job{Name: "sync", Cron: "*/30 * * * *", Zone: "America/New_York", Fold: schedule.FoldTwice},
		time.Date(2026, 11, 1, 4, 45, 0, 0, time.UTC), 6)
	if err != nil {
		fmt.Println(err)
		return
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, f := range fires {
		fmt.Println(f.Local.Format("15:04"), "fold", f.Fold, "at", f.Nominal.In(ny).Format("15:04 MST"))
	}
	// Output:
	// 01:00 fold 0 at 01:00 EDT
	// 01:30 fold 0 at 01:30 EDT
	// 01:00 fold 1 at 01:00 EST
	// 01:30 fold 1 at 01:30 EST
	// 02:00 fold 0 at 02:00 EST
	// 02:30 fold 0 at 02:30 EST
}
