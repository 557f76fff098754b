package bench

// The schedule benchmark: package schedule side by side with what teams use
// today and can run here — a cron (github.com/netresearch/go-cron, the
// maintained fork of robfig/cron) that runs only while its process holds an
// etcd concurrency.Mutex, and River's periodic jobs (leader-elected in
// PostgreSQL) — in one run, on the same servers. Each variant runs 20 jobs
// every second in two scheduler processes whose handlers write one row per
// fire (no unique key); after a steady stretch the firing process (River's
// elected leader, which enqueues the periodic jobs; the last to write for the
// others) is SIGSTOPped for 2 TTLs (6 s) and resumed. Measured per variant: fire lag
// (nominal → the effect row) in steady state and across the freeze,
// duplicates (two rows of one job and nominal time), misses (a job's
// consecutive fires more than an interval apart), and for package schedule
// the PostgreSQL round trips per fire and the etcd writes per fire in steady
// state.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

const (
	schedJobs   = 20
	schedEvery  = time.Second
	schedTTL    = 3 * time.Second
	schedWarm   = 5 * time.Second
	schedSteady = 10 * time.Second
	schedAfter  = 10 * time.Second
)

// schedProc is one scheduler child and what it printed.
type schedProc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	stat [2]int64 // the last STAT: round trips, fires
}

// schedFigures are one variant's results.
type schedFigures struct {
	fires, duplicates, misses       int
	steadyP50, steadyP99, freezeMax time.Duration
	tripsPerFire, etcdWritesPerFire float64
}

func BenchmarkScheduleSideBySide(b *testing.B) {
	e := coordtest.Etcd(b)
	db := coordtest.Postgres(b)
	ctx := context.Background()
	fence, err := pgfence.New(pgfence.Config{LeaseTTL: schedTTL, Logger: quietLog()})
	if err != nil {
		b.Fatal(err)
	}
	admin, err := schedule.NewAdmin(db.Pool, schedule.Config{Tenant: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := fence.Migrate(ctx, db.Pool); err != nil {
		b.Fatal(err)
	}
	if err := admin.Migrate(ctx, db.Pool); err != nil {
		b.Fatal(err)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(db.Pool), nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE sched_effects (variant text NOT NULL, job text NOT NULL, nominal timestamptz NOT NULL,
		writer text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		b.Fatal(err)
	}
	admCli := e.Client(b)
	results := map[string][]schedFigures{}
	n := 0
	for b.Loop() {
		for _, variant := range []string{"schedule", "cron+mutex", "river"} {
			n++
			run := fmt.Sprint(n)
			var procs []*schedProc
			for _, name := range []string{"a", "b"} {
				p := &schedProc{name: variant + "-" + name + run}
				var out io.ReadCloser
				p.cmd, out = startChild(b, fmt.Sprintf("%s=%s|%s|%s|%s|%d|%s|%s|%s", schedChildEnv, variant, p.name,
					e.Endpoints[0], db.URL, schedJobs, schedEvery, schedTTL, run))
				defer func() { _ = p.cmd.Process.Kill(); _ = p.cmd.Wait() }()
				go p.read(out)
				procs = append(procs, p)
				time.Sleep(500 * time.Millisecond) // a first, then b
			}
			from := time.Now()
			time.Sleep(schedWarm) // warm: b's join rebalanced, every job firing, statements prepared
			r0, _ := admCli.Get(ctx, "/bench-nothing")
			t0, f0 := procs[0].stats()
			t1, f1 := procs[1].stats()
			time.Sleep(schedSteady)
			r1, _ := admCli.Get(ctx, "/bench-nothing")
			t2, f2 := procs[0].stats()
			t3, f3 := procs[1].stats()
			// The firing process: River's is its elected leader (it enqueues
			// the periodic jobs), the others' the last one to write.
			var writer string
			q := `SELECT writer FROM sched_effects WHERE variant = $1 ORDER BY at DESC LIMIT 1`
			if variant == "river" {
				q = `SELECT leader_id FROM river_leader WHERE $1 = 'river'`
			}
			if err := db.Pool.QueryRow(ctx, q, variant).Scan(&writer); err != nil {
				b.Fatal(err)
			}
			victim := procs[0]
			if writer == procs[1].name {
				victim = procs[1]
			}
			freeze := time.Now()
			if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				b.Fatal(err)
			}
			time.Sleep(2 * schedTTL)
			if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				b.Fatal(err)
			}
			thaw := time.Now()
			time.Sleep(schedAfter)
			for _, p := range procs {
				_ = p.cmd.Process.Kill()
			}
			fig := schedMeasure(b, db, variant, from.Add(schedWarm), freeze, thaw.Add(schedTTL+2*time.Second), thaw.Add(schedAfter-2*time.Second))
			if fires := float64(f2 - f0 + f3 - f1); variant == "schedule" && fires > 0 {
				fig.tripsPerFire = float64(t2-t0+t3-t1) / fires
				fig.etcdWritesPerFire = float64(r1.Header.Revision-r0.Header.Revision) / fires
			}
			results[variant] = append(results[variant], fig)
			b.Logf("%s: %+v", variant, fig)
		}
	}
	for _, v := range []string{"schedule", "cron+mutex", "river"} {
		var lag99, freezeMax []time.Duration
		dups, misses := 0, 0
		for _, f := range results[v] {
			lag99, freezeMax = append(lag99, f.steadyP99), append(freezeMax, f.freezeMax)
			dups, misses = dups+f.duplicates, misses+f.misses
		}
		slices.Sort(lag99)
		slices.Sort(freezeMax)
		key := strings.ReplaceAll(v, "+", "-")
		b.ReportMetric(float64(lag99[len(lag99)/2].Milliseconds()), key+"-steady-lag-p99-ms")
		b.ReportMetric(float64(freezeMax[len(freezeMax)/2].Milliseconds()), key+"-freeze-lag-max-ms")
		b.ReportMetric(float64(dups)/float64(len(results[v])), key+"-duplicates/run")
		b.ReportMetric(float64(misses)/float64(len(results[v])), key+"-misses/run")
	}
	for _, f := range results["schedule"] {
		b.ReportMetric(f.tripsPerFire, "schedule-pg-round-trips/fire")
		b.ReportMetric(f.etcdWritesPerFire, "schedule-etcd-writes/fire")
	}
}

func (p *schedProc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var t, f int64
		if _, err := fmt.Sscanf(sc.Text(), "STAT %d %d", &t, &f); err == nil {
			p.mu.Lock()
			p.stat = [2]int64{t, f}
			p.mu.Unlock()
		}
	}
}

func (p *schedProc) stats() (int64, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stat[0], p.stat[1]
}

// schedMeasure reads one variant's effects: from steady (the end of the
// warm-up) to end; lag of fires due before the freeze (steady) and of fires
// due from the freeze until settled (the takeover).
func schedMeasure(b *testing.B, db *coordtest.PostgresDB, variant string, steady, freeze, settled, end time.Time) schedFigures {
	ctx := context.Background()
	rows, err := db.Pool.Query(ctx, `SELECT job, nominal, count(*), min(at) FROM sched_effects
		WHERE variant = $1 AND nominal >= $2 AND nominal < $3 GROUP BY 1, 2 ORDER BY 1, 2`, variant, steady, end)
	if err != nil {
		b.Fatal(err)
	}
	var fig schedFigures
	var steadyLag []time.Duration
	last := map[string]time.Time{}
	for rows.Next() {
		var job string
		var nominal, at time.Time
		var copies int
		if err := rows.Scan(&job, &nominal, &copies, &at); err != nil {
			b.Fatal(err)
		}
		fig.fires++
		fig.duplicates += copies - 1
		if prev, ok := last[job]; ok && nominal.Sub(prev) > schedEvery*3/2 {
			fig.misses += int((nominal.Sub(prev)+schedEvery/2)/schedEvery) - 1
		}
		last[job] = nominal
		lag := at.Sub(nominal)
		switch {
		case nominal.Before(freeze):
			steadyLag = append(steadyLag, lag)
		case nominal.Before(settled):
			fig.freezeMax = max(fig.freezeMax, lag)
		}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(steadyLag)
	if len(steadyLag) > 0 {
		fig.steadyP50, fig.steadyP99 = steadyLag[len(steadyLag)/2], steadyLag[len(steadyLag)*99/100]
	}
	return fig
}
