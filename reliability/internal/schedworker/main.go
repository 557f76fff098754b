// Command schedworker is one scheduler process of the schedule reliability
// scenarios (reliability/schedule_test.go): it declares -jobs jobs j0, j1, …
// (an interval, or a cron expression in a zone) whose handler writes one row
// per fire to the effects table (no unique key: a second effect of one fire
// would show), and runs them with package schedule until SIGTERM; when its
// session is lost it runs again on a new one. It reports on stdout, one line
// each, with wall-clock nanoseconds:
//
//	READY <ns>                  a scheduler is running (after each start)
//	FENCED <fire> <ns>          the fence rejected a fire of this process (a stale token)
//	DUP <fire> <ns>             a fire found recorded already, not run again (the key)
//	INTX <fire> <ns>            inside a fire's transaction, armed by -intx-file: the handler sleeps 500 ms
//	DIE <ns>                    armed by -die-file: COMMIT was written, the reply not read: SIGKILL follows
//	LEFT <ns>                   after a SIGTERM, Run returned (the partitions handed over)
//
// -outside writes the effect through the pool instead of the fire's
// transaction: the scenarios' self-test, which must then find a duplicate.
//
// -clock-start and -clock-speed run the schedule's clock from an instant, faster
// than real time (the DST scenarios); the leases keep real time.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease"
	"github.com/coordkit/coordkit/schedule"
)

var outMu sync.Mutex

func say(format string, args ...any) {
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Printf(format+" %d\n", append(args, time.Now().UnixNano())...)
}

func main() { os.Exit(run()) }

func run() int {
	etcd := flag.String("etcd", "", "comma-separated etcd endpoints")
	pgURL := flag.String("pg", "", "PostgreSQL URL")
	tenant := flag.String("tenant", "rel", "coord tenant")
	partitions := flag.Int("partitions", 16, "partitions of the schedulers' group")
	jobs := flag.Int("jobs", 10, "jobs j0 … j(n-1)")
	every := flag.Duration("every", 500*time.Millisecond, "the jobs' interval (without -cron)")
	cronExpr := flag.String("cron", "", "the jobs' cron expression instead of -every")
	zone := flag.String("zone", "UTC", "the jobs' zone")
	fold := flag.String("fold", "once", "the jobs' fold policy; 'mix': by job, once, twice, last")
	gap := flag.String("gap", "run_at_end", "the jobs' gap policy; 'mix': by job, run_at_end, skip")
	window := flag.Duration("window", time.Minute, "the jobs' catch-up window")
	maxCatchUp := flag.Int("max-catch-up", 1000, "the jobs' MaxCatchUp")
	ttl := flag.Duration("ttl", 3*time.Second, "session TTL")
	poll := flag.Duration("poll", 2*time.Second, "PollInterval (on the schedule's clock)")
	clockStart := flag.String("clock-start", "", "RFC 3339 instant the schedule's clock starts at (-clock-base ns)")
	clockBase := flag.Int64("clock-base", 0, "unix ns of the real instant the clock reads -clock-start")
	speed := flag.Float64("clock-speed", 1, "schedule-clock seconds per real second")
	intxFile := flag.String("intx-file", "", "when this file exists, the next fire sleeps inside its transaction (INTX)")
	dieFile := flag.String("die-file", "", "when this file exists, die right after writing a COMMIT (DIE)")
	name := flag.String("name", "w", "this scheduler's name (the effects' writer column)")
	outside := flag.Bool("outside", false, "write the effect through the pool, outside the fire's transaction (the scenarios' self-test)")
	flag.Parse()

	logger := slog.New(&lineHandler{})
	cfg, err := pgxpool.ParseConfig(*pgURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if *dieFile != "" {
		dial := cfg.ConnConfig.DialFunc
		cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			return &dyingConn{Conn: c}, err
		}
		cfg.ConnConfig.Tracer = commitTracer{file: *dieFile}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*etcd, ","), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cli.Close()
	var clock coord.Clock = coord.SystemClock()
	if *clockStart != "" {
		start, err := time.Parse(time.RFC3339, *clockStart)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		clock = fastClock{start: start, base: time.Unix(0, *clockBase), speed: *speed}
	}
	handler := func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
		if *intxFile != "" && os.Remove(*intxFile) == nil {
			say("INTX %s", f.ID)
			time.Sleep(500 * time.Millisecond)
		}
		var db interface {
			Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
		} = tx
		if *outside {
			db = pool // the self-test: outside the transaction on purpose
		}
		_, err := db.Exec(ctx, `INSERT INTO effects (key, job, nominal, token, writer) VALUES ($1, $2, $3, $4, $5)`,
			f.Key(), f.Job, f.Nominal, f.Token.String(), *name)
		return err
	}
	folds := []schedule.FoldPolicy{schedule.FoldOnce, schedule.FoldTwice, schedule.FoldLast}
	gaps := []schedule.GapPolicy{schedule.GapRunAtEnd, schedule.GapSkip}
	for attempt := 0; ctx.Err() == nil; attempt++ {
		s, err := schedule.New(cli, pool, schedule.Config{Tenant: *tenant, Partitions: *partitions, Clock: clock, Logger: logger, PollInterval: *poll})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for i := range *jobs {
			j := schedule.Job{Name: fmt.Sprintf("j%d", i), Zone: *zone, Window: *window, MaxCatchUp: *maxCatchUp,
				Fold: schedule.FoldPolicy(*fold), Gap: schedule.GapPolicy(*gap), Handler: handler}
			if *fold == "mix" {
				j.Fold = folds[i%len(folds)]
			}
			if *gap == "mix" {
				j.Gap = gaps[i%len(gaps)]
			}
			if *cronExpr != "" {
				j.Cron = *cronExpr
			} else {
				j.Every = *every
			}
			if err := s.Add(j); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		sess, err := correctnesslease.NewSession(ctx, cli, correctnesslease.Config{Tenant: *tenant, TTL: *ttl, Logger: logger})
		if err == nil {
			say("READY")
			err = s.Run(ctx, sess)
			sess.Close(context.WithoutCancel(ctx))
			if err == nil {
				attempt = 0
			}
		}
		if ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "%s: scheduler stopped (%v); again\n", *name, err)
			_ = (coord.Backoff{Base: 100 * time.Millisecond, Cap: 2 * time.Second}).Wait(ctx, nil, attempt)
		}
	}
	say("LEFT")
	return 0
}

// lineHandler turns the scheduler's logs into report lines: fence rejections
// and duplicates on stdout, warnings on stderr.
type lineHandler struct{}

func (h *lineHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	fire, cause := "", ""
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "fire":
			fire = a.Value.String()
		case "err":
			cause = ": " + a.Value.String()
		}
		return true
	})
	switch {
	case strings.HasPrefix(r.Message, "schedule: the fence rejected"):
		say("FENCED %s", fire)
	case strings.HasPrefix(r.Message, "schedule: fire recorded already"):
		say("DUP %s", fire)
	case r.Level >= slog.LevelWarn:
		fmt.Fprintf(os.Stderr, "%s %s%s\n", r.Message, fire, cause)
	}
	return nil
}
func (h *lineHandler) WithAttrs(as []slog.Attr) slog.Handler { return h }
func (h *lineHandler) WithGroup(string) slog.Handler         { return h }

// dyingConn kills the process right after it wrote a batch holding a COMMIT
// that commitTracer armed it for: the COMMIT is on its way, its reply never
// read — kill -9 between the two.
type dyingConn struct {
	net.Conn
	armed bool
}

func (c *dyingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.armed {
		say("DIE")
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return n, err
}

// commitTracer arms the connection of the next batch that sends a COMMIT,
// once the die file exists (and removes it).
type commitTracer struct{ file string }

func (t commitTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	for _, q := range data.Batch.QueuedQueries {
		if strings.EqualFold(q.SQL, "commit") && os.Remove(t.file) == nil {
			if dc, ok := conn.PgConn().Conn().(*dyingConn); ok {
				dc.armed = true
			}
		}
	}
	return ctx
}
func (commitTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (commitTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (commitTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (commitTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// fastClock reads start at real instant base and runs speed times faster.
type fastClock struct {
	start, base time.Time
	speed       float64
}

func (c fastClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.base)) * c.speed))
}

func (c fastClock) NewTimer(d time.Duration) coord.Timer {
	return fastTimer{coord.SystemClock().NewTimer(c.real(d)), c}
}

func (c fastClock) real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.speed) }

type fastTimer struct {
	coord.Timer
	c fastClock
}

func (t fastTimer) Reset(d time.Duration) bool { return t.Timer.Reset(t.c.real(d)) }
