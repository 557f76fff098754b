package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	cron "github.com/netresearch/go-cron"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/schedule"
)

// schedChildEnv carries "variant|name|etcd|pg|jobs|interval|ttl|run" to one
// scheduler process of BenchmarkScheduleSideBySide.
const schedChildEnv = "COORDKIT_BENCH_SCHEDULER"

// schedChild runs one scheduler of the variant named in spec until killed:
// its jobs j0 … write one row per fire to sched_effects (no unique key).
// "schedule" also prints "STAT <round trips> <fires>" every 200 ms: the
// PostgreSQL round trips of its pool and the fires it committed.
func schedChild(spec string) error {
	f := strings.Split(spec, "|")
	if len(f) != 8 {
		return fmt.Errorf("spec %q", spec)
	}
	variant, name, etcd, pgURL, run := f[0], f[1], f[2], f[3], f[7]
	jobs, _ := strconv.Atoi(f[4])
	every, _ := time.ParseDuration(f[5])
	ttl, _ := time.ParseDuration(f[6])
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(pgURL)
	if err != nil {
		return err
	}
	var trips, fires atomic.Int64
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		return &tripConn{Conn: c, trips: &trips}, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	insert := func(ctx context.Context, db pgx.Tx, job string, nominal time.Time) error {
		_, err := db.Exec(ctx, `INSERT INTO sched_effects (variant, job, nominal, writer) VALUES ($1, $2, $3, $4)`, variant, job, nominal, name)
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	fmt.Println("READY")
	switch variant {
	case "schedule":
		go func() {
			for range time.Tick(200 * time.Millisecond) {
				fmt.Println("STAT", trips.Load(), fires.Load())
			}
		}()
		for ctx.Err() == nil {
			s, err := schedule.New(cli, pool, schedule.Config{Tenant: "bench" + run, Partitions: 16, Logger: quietLog()})
			if err != nil {
				return err
			}
			for i := range jobs {
				err := s.Add(schedule.Job{Name: fmt.Sprintf("j%d", i), Every: every, Window: time.Hour, MaxCatchUp: 1000,
					Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
						fires.Add(1)
						return insert(ctx, tx, f.Job, f.Nominal)
					}})
				if err != nil {
					return err
				}
			}
			sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: "bench" + run, TTL: ttl, Logger: quietLog()})
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			err = s.Run(ctx, sess)
			_ = sess.Close(ctx)
			fmt.Fprintln(os.Stderr, "schedule child:", err)
		}
	case "cron+mutex":
		// The hand-rolled way: the cron runs only while this process holds the
		// etcd mutex; it stops when the session is done.
		for ctx.Err() == nil {
			sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(ttl/time.Second)))
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			m := concurrency.NewMutex(sess, "/bench/schedule/"+run)
			if err := m.Lock(ctx); err != nil {
				sess.Close()
				continue
			}
			c := cron.New(cron.WithSeconds(), cron.WithMinEveryInterval(0))
			for i := range jobs {
				job := fmt.Sprintf("j%d", i)
				if _, err := c.AddFunc("@every "+every.String(), func() {
					nominal := time.Now().Truncate(every)
					if _, err := pool.Exec(ctx, `INSERT INTO sched_effects (variant, job, nominal, writer) VALUES ($1, $2, $3, $4)`,
						variant, job, nominal, name); err != nil {
						fmt.Fprintln(os.Stderr, "cron job:", err)
					}
				}); err != nil {
					return err
				}
			}
			c.Start()
			<-sess.Done()
			c.Stop()
		}
	case "river":
		workers := river.NewWorkers()
		river.AddWorker(workers, &riverFire{pool: pool, name: name})
		var periodic []*river.PeriodicJob
		for i := range jobs {
			job := fmt.Sprintf("j%d", i)
			periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(every),
				func() (river.JobArgs, *river.InsertOpts) { return riverArgs{Job: job}, nil }, &river.PeriodicJobOpts{ID: job}))
		}
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{ID: name, Workers: workers, PeriodicJobs: periodic,
			Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 20}}, Logger: quietLog()})
		if err != nil {
			return err
		}
		if err := client.Start(ctx); err != nil {
			return err
		}
		<-client.Stopped()
	default:
		return errors.New("unknown variant " + variant)
	}
	return nil
}

type riverArgs struct {
	Job string `json:"job"`
}

func (riverArgs) Kind() string { return "bench_fire" }

// riverFire is River's worker: one effect row per job, its nominal time the
// job's scheduled_at (the periodic enqueuer's schedule time).
type riverFire struct {
	river.WorkerDefaults[riverArgs]
	pool *pgxpool.Pool
	name string
}

func (w *riverFire) Work(ctx context.Context, job *river.Job[riverArgs]) error {
	_, err := w.pool.Exec(ctx, `INSERT INTO sched_effects (variant, job, nominal, writer) VALUES ('river', $1, $2, $3)`,
		job.Args.Job, job.ScheduledAt, w.name)
	return err
}

// tripConn counts round trips: a write that follows a read starts one.
type tripConn struct {
	net.Conn
	trips   *atomic.Int64
	reading atomic.Bool
}

func (c *tripConn) Write(p []byte) (int, error) {
	if c.reading.Swap(false) {
		c.trips.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *tripConn) Read(p []byte) (int, error) {
	c.reading.Store(true)
	return c.Conn.Read(p)
}
