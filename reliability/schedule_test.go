package reliability

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The scheduler process of the schedule scenarios (its package doc lists the
// lines it prints).
const schedWorkerPkg = "github.com/coordkit/coordkit/reliability/internal/schedworker"

// The faults of the schedule scenarios, by the names they are counted under.
const (
	schedFaultPause     = "scheduler SIGSTOPped for 2 TTLs"
	schedFaultPauseInTx = "scheduler SIGSTOPped for 2 TTLs inside a fire's transaction"
	schedFaultKill      = "scheduler killed (SIGKILL) after writing COMMIT, before reading its reply"
	schedFaultBlackhole = "scheduler's etcd connections blackholed for 2 TTLs"
	schedFaultLeader    = "etcd raft leader restarted"
	schedFaultRolling   = "scheduler terminated (Leave) and restarted in a rolling restart"
)

// schedRun sizes one run of a schedule scenario.
type schedRun struct {
	workers, jobs, partitions int
	every, ttl, window        time.Duration
	etcdMembers               int
	faults                    []string
	steady                    time.Duration // fault-free running at the end (the full tier's volume)
	tenant                    string
	// cron jobs on an accelerated clock (the DST scenario) instead of -every
	cron, zone, fold, gap string
	clockStart            time.Time
	speed                 float64
	outside               bool // the self-test: effects outside the fire's transaction
}

// schedWorker is one scheduler process and its own proxies to every etcd member.
type schedWorker struct {
	name           string
	proc           *coordtest.Process
	proxies        []*coordtest.Proxy
	intxF, dieFile string
}

// schedSpan is a fault's window: from its injection until the schedulers
// settled again (fires due inside it may be late by the takeover).
type schedSpan struct{ from, to time.Time }

// schedVerdict is what a run observed and what it found wrong.
type schedVerdict struct {
	trials     int
	faults     map[string]int
	outcome    map[string]int64
	notes      []string
	violations []string
	spans      []schedSpan
	clockBase  time.Time // the real instant the schedule clock reads clockStart (accelerated runs)
	stopped    time.Time
}

func (v *schedVerdict) violate(format string, args ...any) {
	v.violations = append(v.violations, fmt.Sprintf(format, args...))
}

func (v *schedVerdict) into(t *testing.T, res *coordtest.Result) {
	res.Trials, res.Faults, res.Outcome, res.Notes = v.trials, v.faults, v.outcome, strings.Join(v.notes, "; ")
	for _, msg := range v.violations {
		t.Error(msg)
	}
}

// startSchedWorkers prepares the tables and starts run.workers scheduler
// processes; it returns them with the database.
func startSchedWorkers(t *testing.T, run schedRun, eps []string, v *schedVerdict) ([]*schedWorker, *coordtest.PostgresDB) {
	bin := coordtest.Build(t, schedWorkerPkg)
	db := coordtest.Postgres(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fence, err := pgfence.New(pgfence.Config{LeaseTTL: run.ttl, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := schedule.NewAdmin(db.Pool, schedule.Config{Tenant: run.tenant})
	if err != nil {
		t.Fatal(err)
	}
	if err := fence.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if err := admin.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	// No unique key: a second effect of one fire must show.
	if _, err := db.Pool.Exec(ctx, `CREATE TABLE effects (key text NOT NULL, job text NOT NULL, nominal timestamptz NOT NULL,
		token text NOT NULL, writer text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	url := db.URL + "&synchronous_commit=off&pool_max_conns=4"
	dir := t.TempDir()
	v.clockBase = time.Now().Add(2 * time.Second)
	ws := make([]*schedWorker, run.workers)
	for i := range ws {
		w := &schedWorker{name: fmt.Sprintf("s%d", i), intxF: filepath.Join(dir, fmt.Sprintf("intx%d", i)), dieFile: filepath.Join(dir, fmt.Sprintf("die%d", i))}
		var weps []string
		for _, ep := range eps {
			p := coordtest.NewProxy(t, strings.TrimPrefix(ep, "http://"))
			w.proxies = append(w.proxies, p)
			weps = append(weps, p.URL())
		}
		args := []string{"-etcd", strings.Join(weps, ","), "-pg", url, "-tenant", run.tenant, "-name", w.name,
			"-partitions", strconv.Itoa(run.partitions), "-jobs", strconv.Itoa(run.jobs), "-ttl", run.ttl.String(),
			"-window", run.window.String(), "-intx-file", w.intxF, "-die-file", w.dieFile}
		if run.outside {
			args = append(args, "-outside")
		}
		if run.cron != "" {
			args = append(args, "-cron", run.cron, "-zone", run.zone, "-fold", run.fold, "-gap", run.gap,
				"-clock-start", run.clockStart.Format(time.RFC3339), "-clock-base", strconv.FormatInt(v.clockBase.UnixNano(), 10),
				"-clock-speed", strconv.FormatFloat(run.speed, 'f', -1, 64), "-poll", (time.Duration(run.speed) * time.Second).String())
		} else {
			args = append(args, "-every", run.every.String())
		}
		w.proc = coordtest.StartProcess(t, "scheduler "+w.name, bin, args...)
		ws[i] = w
	}
	for _, w := range ws {
		w.proc.WaitOutput(t, "READY", 30*time.Second)
	}
	t.Logf("%s: %d schedulers ready %s after the clock base", run.tenant, len(ws), time.Until(v.clockBase).Round(time.Millisecond))
	return ws, db
}

// runSchedule runs the interval scenario: run.jobs jobs over run.workers
// scheduler processes, the faults one after another, then a fault-free
// stretch; then every scheduler leaves and the records are checked.
func runSchedule(t *testing.T, run schedRun) *schedVerdict {
	v := &schedVerdict{faults: map[string]int{}, outcome: map[string]int64{}}
	cluster := coordtest.EtcdCluster(t, run.etcdMembers, nil)
	admin := coordtest.NewEtcdClient(t, cluster.Endpoints()...)
	ws, db := startSchedWorkers(t, run, cluster.Endpoints(), v)
	coordtest.Until(t, 30*time.Second, 100*time.Millisecond, "every job firing", func() bool {
		var n int
		return db.Pool.QueryRow(context.Background(), `SELECT count(DISTINCT job) FROM effects`).Scan(&n) == nil && n == run.jobs
	})
	time.Sleep(coordtest.Pick(500*time.Millisecond, 3*time.Second)) // a fault-free window for the steady-state lag
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	settle := func() { time.Sleep(run.ttl + time.Second) }
	for _, kind := range run.faults {
		w := ws[rng.IntN(len(ws))]
		span := schedSpan{from: time.Now()}
		switch kind {
		case schedFaultPause, schedFaultPauseInTx:
			if kind == schedFaultPauseInTx {
				if err := os.WriteFile(w.intxF, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				w.proc.WaitOutput(t, "INTX", 10*time.Second)
			}
			before := w.proc.Stats().Pauses
			if err := w.proc.Pause(); err != nil {
				t.Fatal(err)
			}
			coordtest.WaitStopped(t, w.proc.Pid(), 5*time.Second)
			v.faults[kind] += w.proc.Stats().Pauses - before
			time.Sleep(2 * run.ttl)
			if err := w.proc.Resume(); err != nil {
				t.Fatal(err)
			}
		case schedFaultKill:
			dies := strings.Count(w.proc.Output(), "DIE ")
			if err := os.WriteFile(w.dieFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			coordtest.Recv(t, w.proc.Exited(), 20*time.Second, w.name+" to die after writing a COMMIT")
			if strings.Count(w.proc.Output(), "DIE ") > dies {
				v.faults[kind]++
			}
			w.proc.Kill() // it is gone: forget it
			if err := w.proc.Start(); err != nil {
				t.Fatal(err)
			}
		case schedFaultBlackhole:
			var dropped int64
			for _, p := range w.proxies {
				dropped -= p.Stats().DroppedBytes
				p.Blackhole()
			}
			time.Sleep(2 * run.ttl)
			for _, p := range w.proxies {
				p.Heal()
				p.Cut()
				dropped += p.Stats().DroppedBytes
			}
			if dropped > 0 {
				v.faults[kind]++
			}
		case schedFaultLeader:
			lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l := cluster.Leader(lctx, admin)
			cancel()
			if l < 0 {
				t.Fatal("no etcd member says it is the leader")
			}
			before := cluster.Members[l].Stats().Kills
			cluster.RestartMember(t, l)
			v.faults[kind] += cluster.Members[l].Stats().Kills - before
		case schedFaultRolling:
			for _, w := range ws {
				lefts := strings.Count(w.proc.Output(), "LEFT ")
				w.proc.Terminate(30 * time.Second)
				if strings.Count(w.proc.Output(), "LEFT ") > lefts {
					v.faults[kind]++
				}
				if err := w.proc.Start(); err != nil {
					t.Fatal(err)
				}
				w.proc.WaitOutput(t, "READY", 30*time.Second)
				time.Sleep(time.Second)
			}
		}
		settle()
		span.to = time.Now()
		v.spans = append(v.spans, span)
		v.trials++
	}
	time.Sleep(run.steady)
	v.stopped = time.Now()
	for _, w := range ws {
		w.proc.Terminate(30 * time.Second)
	}
	schedCheck(t, v, db, run, ws)
	return v
}

// TestScheduleUnderFaults: scheduler processes fire interval jobs whose
// handlers write one effect row per fire, while the firing schedulers are
// SIGSTOPped for 2 TTLs inside a fire's transaction, killed -9 between
// writing COMMIT and reading its reply, and cut off from etcd for 2 TTLs
// (and, in the full tier, SIGSTOPped at a random moment too, while the etcd
// leader restarts and every scheduler is restarted in turn; the bounded
// tier's random-moment SIGSTOP is TestScheduleDSTOnAnAcceleratedClock's). Pass: effects =
// distinct fire identities, each with its ok record; no scheduled fire
// missing; none missed inside the catch-up window; the lag reported.
func TestScheduleUnderFaults(t *testing.T) {
	// The bounded tier's SIGSTOP at a random moment is the DST scenario's.
	faults := coordtest.Pick([]string{schedFaultPauseInTx, schedFaultKill, schedFaultBlackhole},
		[]string{schedFaultPause, schedFaultPauseInTx, schedFaultKill, schedFaultBlackhole, schedFaultLeader, schedFaultRolling})
	res := coordtest.NewResult(t, "schedule: schedulers SIGSTOPped before and inside a fire's transaction, killed after COMMIT, cut off from etcd (full tier: also etcd leader restart, rolling restart, ≥ 10,000 fires): one effect per fire, none missed in the window",
		coordtest.Faults(faults...))
	defer coordtest.Report(t, res)
	run := coordtest.Pick(
		schedRun{workers: 3, jobs: 20, partitions: 16, every: 300 * time.Millisecond, ttl: 2 * time.Second, window: time.Minute, etcdMembers: 1, tenant: "rel"},
		schedRun{workers: 5, jobs: 100, partitions: 64, every: 500 * time.Millisecond, ttl: 3 * time.Second, window: time.Minute, etcdMembers: 3,
			steady: 20 * time.Second, tenant: "rel"})
	run.faults = faults
	v := runSchedule(t, run)
	v.into(t, res)
	if coordtest.Full() && v.outcome["fires"] < 10000 {
		t.Errorf("%d fires, want at least 10,000 in the full tier", v.outcome["fires"])
	}
}

// TestScheduleDSTOnAnAcceleratedClock: daily jobs at 01:30 and 02:30 New
// York time (fold and gap policies mixed over the jobs) run on a schedule
// clock 200,000 times faster than real time — two scheduler groups at once,
// one across the night of 1 November 2026 (01:30 happens twice) and one
// across 8 March 2026 (02:30 does not exist) — while the firing scheduler of
// each is SIGSTOPped for 2 TTLs (about 9 days of the schedule's clock: the
// catch-up crosses the transition). Pass: every job's fires are exactly its
// Preview (its DST policies), each effect once; GapSkip's gap times recorded
// missed (dst_gap), nothing else missed.
func TestScheduleDSTOnAnAcceleratedClock(t *testing.T) {
	res := coordtest.NewResult(t, "schedule: DST fold and gap on an accelerated clock, the firing scheduler SIGSTOPped across the transition",
		coordtest.Faults(schedFaultPause))
	defer coordtest.Report(t, res)
	cluster := coordtest.EtcdCluster(t, 1, nil)
	type phase struct {
		run schedRun
		v   *schedVerdict
		ws  []*schedWorker
		db  *coordtest.PostgresDB
	}
	var phases []*phase
	for i, start := range []time.Time{time.Date(2026, 10, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)} {
		p := &phase{run: schedRun{workers: 2, jobs: 6, partitions: 8, ttl: 2 * time.Second, window: 30 * 24 * time.Hour, etcdMembers: 1,
			tenant: fmt.Sprintf("dst%d", i), cron: "30 1,2 * * *", zone: "America/New_York", fold: "mix", gap: "mix",
			clockStart: start, speed: 200000}, v: &schedVerdict{faults: map[string]int{}, outcome: map[string]int64{}}}
		p.ws, p.db = startSchedWorkers(t, p.run, cluster.Endpoints(), p.v)
		phases = append(phases, p)
	}
	time.Sleep(time.Until(phases[1].v.clockBase.Add(500 * time.Millisecond)))
	for _, p := range phases { // the firing scheduler: the one whose effects come last
		var writer string
		if err := p.db.Pool.QueryRow(context.Background(), `SELECT writer FROM effects ORDER BY at DESC LIMIT 1`).Scan(&writer); err != nil {
			t.Fatal(err)
		}
		w := p.ws[0]
		if writer == p.ws[1].name {
			w = p.ws[1]
		}
		before := w.proc.Stats().Pauses
		if err := w.proc.Pause(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.proc.Resume() }()
		res.Faults[schedFaultPause] += w.proc.Stats().Pauses - before
	}
	time.Sleep(2 * phases[0].run.ttl)
	for _, p := range phases {
		for _, w := range p.ws {
			if err := w.proc.Resume(); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(2 * time.Second) // the clock runs on: about 5 more days
	res.Outcome = map[string]int64{}
	for _, p := range phases {
		p.v.stopped = time.Now()
		for _, w := range p.ws {
			w.proc.Terminate(30 * time.Second)
			t.Logf("%s %s terminated after %s", p.run.tenant, w.name, time.Since(p.v.stopped).Round(time.Millisecond))
		}
		schedCheck(t, p.v, p.db, p.run, p.ws)
		for k, n := range p.v.outcome {
			res.Outcome[p.run.tenant+": "+k] += n
		}
		for _, msg := range p.v.violations {
			t.Errorf("%s: %s", p.run.tenant, msg)
		}
	}
	res.Trials = len(phases)
}

// TestScheduleScenarioCatchesAnEffectOutsideTheTransaction runs the scenario's
// in-transaction pause with schedulers whose handlers write their effect
// through the pool instead of the fire's transaction: the frozen scheduler's
// effect lands when it wakes, after its successor ran the same fire, and the
// scenario must report the duplicate — else its passing on the real handlers
// would prove nothing.
func TestScheduleScenarioCatchesAnEffectOutsideTheTransaction(t *testing.T) {
	v := runSchedule(t, schedRun{workers: 2, jobs: 6, partitions: 8, every: 300 * time.Millisecond, ttl: 2 * time.Second, window: time.Minute,
		etcdMembers: 1, tenant: "rel", faults: []string{schedFaultPauseInTx}, outside: true})
	if v.faults[schedFaultPauseInTx] == 0 {
		t.Fatalf("the scheduler was not paused inside a fire (faults %v): the run cannot tell", v.faults)
	}
	found := false
	for _, msg := range v.violations {
		t.Logf("violation found, as it must be: %.300s", msg)
		found = found || strings.Contains(msg, "duplicates")
	}
	if !found {
		t.Errorf("with effects outside the transaction the scenario reported no duplicate; violations: %q", v.violations)
	}
}
