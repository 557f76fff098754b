package saga

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The crash test re-executes the test binary as a runner process (TestMain sees
// workerEnv) and SIGKILLs it at every step boundary.
const workerEnv = "COORD_SAGA_WORKER"

// crashWorker is the child: os.Args = [bin, -test.run=^$, url, crash, pause] where
// crash and pause are "point:step:nth" or "-". At the nth time this process
// reaches the boundary it prints "CRASH point step" (and blocks until killed) or
// "PAUSE" (and sleeps 500 ms, while the parent stops it).
func crashWorker() int {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "worker: want url crash pause")
		return 2
	}
	url, crash, pause := os.Args[2], os.Args[3], os.Args[4]
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	b, _ := NewBarrier(BarrierConfig{})
	p := &participant{pool: pool, b: b, calls: map[string]int{}}
	cfg := crashConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := NewClient(pool, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	d, err := orderDefinition(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	if err := c.Register(d); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	var mu sync.Mutex
	seen := map[string]int{}
	c.hook = func(pt hookPoint, id string, step int) {
		k := fmt.Sprintf("%s:%d", pt, step)
		mu.Lock()
		seen[k]++
		n := seen[k]
		mu.Unlock()
		if crash != "-" && crash == fmt.Sprintf("%s:%d", k, n) {
			fmt.Printf("CRASH %s %s\n", k, id)
			select {} // the parent SIGKILLs us here
		}
		if pause != "-" && pause == fmt.Sprintf("%s:%d", k, n) {
			fmt.Printf("PAUSE %s %s\n", k, id)
			time.Sleep(500 * time.Millisecond) // the parent SIGSTOPs us in here
		}
	}
	fmt.Println("READY")
	c.Run(ctx)
	return 0
}

func crashConfig() Config {
	return Config{
		Concurrency:  4,
		ClaimTTL:     time.Second,
		PollInterval: 50 * time.Millisecond,
		Backoff:      coord.Backoff{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond},
	}
}

// crashPoints are every step boundary of the fixture: before and after each
// forward call (so just before and just after the pivot) and after its commit,
// and the same around compensations.
func crashPoints() []string {
	var out []string
	for step := range fixtureSteps {
		for _, p := range []hookPoint{hookBeforeAction, hookAfterAction, hookAfterCommit} {
			out = append(out, fmt.Sprintf("%s:%d", p, step))
		}
		if step < 2 {
			for _, p := range []hookPoint{hookBeforeCompensate, hookAfterCompensate, hookAfterCompCommit} {
				out = append(out, fmt.Sprintf("%s:%d", p, step))
			}
		}
	}
	return out
}

// crashOrder makes the data of saga i: most complete, some fail before or at the
// pivot (and compensate), some are flaky (retried).
func crashOrder(i int) order {
	switch i % 10 {
	case 1, 5:
		return order{Amount: i, FailAt: "ship"}
	case 3:
		return order{Amount: i, FailAt: "charge"}
	case 7:
		return order{Amount: i, FlakyAt: "ship"}
	case 9:
		return order{Amount: i, FlakyAt: "notify"}
	}
	return order{Amount: i}
}

func TestCrashAtEveryBoundary(t *testing.T) {
	res := coordtest.NewResult(t, "saga runners SIGKILLed at every step boundary, one paused past its claim", coordtest.Faults("runner SIGKILLed at a step boundary", "runner paused past its claim"))
	defer coordtest.Report(t, res)
	n := coordtest.Pick(100, 500)
	e := newEnv(t)
	ctx := context.Background()
	c, def := e.client(t, crashConfig())
	var ids []string
	data := map[string]order{}
	start := func(k int) {
		for range k {
			o := crashOrder(len(ids))
			id, err := Start(ctx, c, def, o, &StartOpts{ID: fmt.Sprintf("crash-%04d", len(ids))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			data[id] = o
		}
	}
	start(n)
	t.Setenv(workerEnv, "1")
	spawn := func(name, crash, pause string) *coordtest.Process {
		p := coordtest.StartProcess(t, name, os.Args[0], "-test.run=^$", e.db.URL, crash, pause)
		p.WaitOutput(t, "READY", 60*time.Second)
		return p
	}

	// 1. A paused runner: stopped inside a step past its claim, while another
	// runner takes the saga over; when it resumes, its write must be rejected.
	helper := spawn("helper", "-", "-")
	paused := spawn("paused", "-", "after_action:1:1")
	paused.WaitOutput(t, "PAUSE", 60*time.Second)
	if err := paused.Pause(); err != nil {
		t.Fatal(err)
	}
	pausedID := strings.Fields(lineWith(paused.Output(), "PAUSE"))[2]
	deadline := time.Now().Add(60 * time.Second)
	for {
		i, err := c.Get(ctx, pausedID)
		if err != nil {
			t.Fatal(err)
		}
		if i.Step > 1 || i.State.Terminal() {
			break // the helper took over and moved past step 1
		}
		if time.Now().After(deadline) {
			t.Fatalf("nobody took over the paused runner's saga: %+v", i)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := paused.Resume(); err != nil {
		t.Fatal(err)
	}
	paused.WaitOutput(t, "claim lost, write rejected", 30*time.Second)
	staleRejected := strings.Count(paused.Output(), "claim lost, write rejected")
	pauses := paused.Stats().Pauses
	paused.Kill()
	helper.Kill()

	// 2. Two runners at a time, each SIGKILLed at its assigned boundary, until
	// every boundary has seen `rounds` kills.
	points := crashPoints()
	rounds := coordtest.Pick(1, 3)
	killsAt := map[string]int{}
	timeouts := 0
	var mu sync.Mutex
	for iter := 0; iter < 10*rounds; iter++ {
		var pending []string
		for _, pt := range points {
			if killsAt[pt] < rounds {
				pending = append(pending, pt)
			}
		}
		if len(pending) == 0 {
			break
		}
		for j := 0; j < len(pending); j += 2 {
			// Keep work available so every boundary can be reached.
			if countNonTerminal(t, c) < 20 {
				start(20)
			}
			var wg sync.WaitGroup
			for k, pt := range pending[j:min(j+2, len(pending))] {
				wg.Add(1)
				nth := 1 + (iter+j+k)%2
				go func() {
					defer wg.Done()
					p := coordtest.StartProcess(t, "runner-"+pt, os.Args[0], "-test.run=^$", e.db.URL, fmt.Sprintf("%s:%d", pt, nth), "-")
					hit := p.Printed("CRASH", 5*time.Second) == nil
					p.Kill() // SIGKILL, at the boundary when hit
					mu.Lock()
					defer mu.Unlock()
					if hit {
						killsAt[pt]++
					} else {
						timeouts++
					}
				}()
			}
			coordtest.Wait(t, &wg, 60*time.Second, "the runners started to be killed at a boundary (each waits 5 s for its CRASH line)")
		}
	}
	for _, pt := range points {
		if killsAt[pt] < rounds {
			t.Errorf("runners killed at %s %d times, want %d", pt, killsAt[pt], rounds)
		}
	}

	// 3. A clean runner drives what is left to the end.
	run(t, c)
	deadline = time.Now().Add(90 * time.Second)
	for countNonTerminal(t, c) > 0 {
		if time.Now().After(deadline) {
			l, _ := c.List(ctx, &ListOpts{States: []State{StateRunning, StateCompensating, StateNeedsHuman}})
			t.Fatalf("%d sagas not terminal, e.g. %+v", len(l), l[0])
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The verdict.
	kills := 0
	for _, k := range killsAt {
		kills += k
	}
	completed, compensated := 0, 0
	for _, id := range ids {
		i, err := c.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		o := data[id]
		got := effects(t, e.db.Pool, id)
		want := map[string]int{}
		switch {
		case o.FailAt != "":
			compensated++
			if i.State != StateCompensated || i.PivotAt != nil {
				t.Errorf("%s (fail at %s): %s pivot %v", id, o.FailAt, i.State, i.PivotAt)
			}
			for _, s := range fixtureSteps {
				if s == o.FailAt {
					break
				}
				want[s+"/action"], want[s+"/compensate"] = 1, 1
			}
		default:
			completed++
			if i.State != StateCompleted {
				t.Errorf("%s: %s", id, i.State)
			}
			for _, s := range fixtureSteps {
				want[s+"/action"] = 1
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s (%+v): participant effects %v, want each exactly once: %v", id, o, got, want)
		}
	}
	var afterPivot int
	if err := e.db.Pool.QueryRow(ctx, `SELECT count(*) FROM effects a JOIN effects c USING (saga_id)
		WHERE a.step = 'ship' AND a.op = 'action' AND c.op = 'compensate'`).Scan(&afterPivot); err != nil {
		t.Fatal(err)
	}
	if afterPivot != 0 {
		t.Errorf("%d compensations after the pivot", afterPivot)
	}
	t.Logf("sagas %d (completed %d, compensated %d), all terminal; SIGKILLs at boundaries %d over %d boundaries, kills without reaching the boundary %d; paused runner's stale writes rejected %d; compensations after pivot %d",
		len(ids), completed, compensated, kills, len(points), timeouts, staleRejected, afterPivot)
	res.Trials = len(ids)
	res.Faults["runner SIGKILLed at a step boundary"] = kills
	res.Faults["runner paused past its claim"] = pauses
	res.Outcome["runner killed before reaching its boundary"] = int64(timeouts)
	res.Outcome["sagas terminal"] = int64(completed + compensated)
	res.Outcome["sagas completed"] = int64(completed)
	res.Outcome["sagas compensated"] = int64(compensated)
	res.Outcome["stale writes rejected"] = int64(staleRejected)
	res.Outcome["compensations after the pivot"] = int64(afterPivot)
	res.Notes = fmt.Sprintf("%d boundaries, each killed at least %d time(s); trials = sagas; every participant effect checked exactly once", len(points), rounds)
	if kills < len(points) || staleRejected < 1 || len(ids) < 100 {
		t.Fatalf("faults did not happen: kills %d stale %d sagas %d", kills, staleRejected, len(ids))
	}
}

func lineWith(out, substr string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, substr) {
			return l
		}
	}
	return ""
}

func countNonTerminal(t *testing.T, c *Client) int {
	t.Helper()
	var n int
	q := `SELECT count(*) FROM ` + pgschema.Qualified(c.cfg.Schema, c.cfg.Table) + ` WHERE state NOT IN ('completed', 'compensated')`
	if err := c.pool.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
