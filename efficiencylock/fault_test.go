package efficiencylock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/efficiencylock"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// Fault trials: workers take one lock (auto-refreshed) to run numbered jobs of
// faultSteps steps, while the test pauses Redis past the ttl or restarts it empty.
// Each step's effect is applied after a check of the guard's context
// (check-then-act, as real code does). A step executed twice is a duplicate
// execution; one executed while another worker also believed it held the lock is a
// concurrent duplicate, which a correct lock would have prevented. The trials
// count both and report them as the evidence that this lock is for efficiency
// only. What they assert is what the package promises: no panic, every
// guard that held the lock during a fault learns it lost the lock (Context
// cancelled) within one refresh period, and typed errors afterwards.

const (
	faultTTL     = 1500 * time.Millisecond
	faultPeriod  = faultTTL / 3           // auto-refresh period
	faultStep    = 100 * time.Millisecond // one unit of work, applied after a context check
	faultSteps   = 30                     // steps per job: a job outlives ttl + refresh period
	faultWorkers = 4
	// Scheduling slack for a busy 2-core machine running -race: a refresh's round
	// trip, go-redis reconnect retries, and the goroutine wake-up.
	faultSlack = time.Second
)

func faultRounds() int { return coordtest.Pick(2, 10) }

type guardRec struct {
	lock       *efficiencylock.Lock
	acquiredAt time.Time
	mu         sync.Mutex
	endedAt    time.Time // when Context was cancelled
	stop       func() bool
}

func (g *guardRec) ended() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.endedAt, !g.endedAt.IsZero()
}

type trial struct {
	t      *testing.T
	locker *efficiencylock.Locker

	mu         sync.Mutex
	next       int            // the next job to run
	execs      map[[2]int]int // (job, step) → times its effect was applied
	guards     []*guardRec
	holding    int // workers inside a job
	overlaps   int // acquisitions that started while another worker was inside a job
	concurrent int // steps applied while another worker was inside a job
	abandoned  int // jobs given up because the guard's context ended
	completed  int // jobs finished

	acquireErrs, releaseOK, releaseNotHeld, releaseErrs atomic.Int64
	panics                                              atomic.Int64
}

func newTrial(t *testing.T, srv *coordtest.RedisServer) *trial {
	return &trial{
		t:      t,
		locker: newLocker(t, srv.Client(t), "fault", efficiencylock.Config{AutoRefresh: true}),
		execs:  map[[2]int]int{},
	}
}

func (tr *trial) worker(ctx context.Context) {
	defer func() {
		if r := recover(); r != nil {
			tr.panics.Add(1)
			tr.t.Errorf("panic: %v", r)
		}
	}()
	for ctx.Err() == nil {
		lk, err := tr.locker.Acquire(ctx, "job", faultTTL, &efficiencylock.LockOpts{Retry: coord.Backoff{Base: 5 * time.Millisecond, Cap: 100 * time.Millisecond}})
		if err != nil {
			if ctx.Err() == nil {
				tr.acquireErrs.Add(1)
				time.Sleep(20 * time.Millisecond)
			}
			continue
		}
		g := &guardRec{lock: lk, acquiredAt: time.Now()}
		lctx := lk.Context()
		g.stop = context.AfterFunc(lctx, func() {
			g.mu.Lock()
			g.endedAt = time.Now()
			g.mu.Unlock()
		})
		tr.mu.Lock()
		tr.guards = append(tr.guards, g)
		if tr.holding > 0 {
			tr.overlaps++
		}
		tr.holding++
		job := tr.next
		tr.mu.Unlock()

		done := true
		for step := range faultSteps {
			select {
			case <-time.After(faultStep):
			case <-lctx.Done():
			}
			tr.mu.Lock()
			if lctx.Err() != nil {
				tr.mu.Unlock()
				done = false
				break
			}
			tr.execs[[2]int{job, step}]++ // check, then act: the window real code has too
			if tr.holding > 1 {
				tr.concurrent++
			}
			tr.mu.Unlock()
		}
		tr.mu.Lock()
		if done {
			tr.completed++
			if job == tr.next {
				tr.next++
			}
		} else {
			tr.abandoned++
		}
		tr.holding--
		tr.mu.Unlock()

		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = lk.Release(rctx)
		cancel()
		switch {
		case err == nil:
			tr.releaseOK.Add(1)
		case errors.Is(err, efficiencylock.ErrNotHeld):
			tr.releaseNotHeld.Add(1)
		default:
			tr.releaseErrs.Add(1)
		}
	}
}

// holders returns the guards whose context has not ended yet.
func (tr *trial) holders() []*guardRec {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []*guardRec
	for _, g := range tr.guards {
		if _, ok := g.ended(); !ok {
			out = append(out, g)
		}
	}
	return out
}

// faultPhase picks how far into a holder's job (and so into its refresh period)
// the next fault lands: uniform in [100ms, 1.1s), a window of 100ms.
func faultPhase() (minAge, maxAge time.Duration) {
	minAge = 100*time.Millisecond + rand.N(time.Second)
	return minAge, minAge + 100*time.Millisecond
}

// freshHolders waits until a guard that acquired between minAge and maxAge ago
// holds the lock, so the fault lands inside its job after it applied a few steps,
// and returns the current holders.
func (tr *trial) freshHolders(minAge, maxAge time.Duration) []*guardRec {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		held := tr.holders()
		for _, g := range held {
			if age := time.Since(g.acquiredAt); age >= minAge && age < maxAge {
				return held
			}
		}
	}
	tr.t.Errorf("no worker acquired the lock within 10s")
	return nil
}

// run starts the workers, calls fault once per round, and stops.
func (tr *trial) run(rounds int, fault func(round int)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range faultWorkers {
		wg.Go(func() { tr.worker(ctx) })
	}
	for r := range rounds {
		fault(r)
	}
	time.Sleep(faultTTL)
	cancel()
	coordtest.Wait(tr.t, &wg, 60*time.Second, "the workers, after cancel")
	tr.mu.Lock()
	for _, g := range tr.guards {
		g.stop()
	}
	tr.mu.Unlock()
}

// report logs the figures, records them in res and returns the number of
// duplicate executions.
func (tr *trial) report(kind string, res *coordtest.Result) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	dups := 0
	for _, n := range tr.execs {
		dups += max(0, n-1)
	}
	tr.t.Logf("%s: %d acquisitions, %d jobs completed, %d abandoned on loss; %d steps applied, %d DUPLICATE EXECUTIONS "+
		"(steps applied more than once), %d of them CONCURRENT (applied while another worker also held the lock); "+
		"%d acquisitions while another worker was inside a job; releases: %d ok, %d not held, %d errors; acquire errors %d; panics %d",
		kind, len(tr.guards), tr.completed, tr.abandoned, len(tr.execs), dups, tr.concurrent, tr.overlaps,
		tr.releaseOK.Load(), tr.releaseNotHeld.Load(), tr.releaseErrs.Load(), tr.acquireErrs.Load(), tr.panics.Load())
	res.Outcome["acquisitions"] = int64(len(tr.guards))
	res.Outcome["jobs completed"] = int64(tr.completed)
	res.Outcome["jobs abandoned on loss"] = int64(tr.abandoned)
	res.Outcome["steps applied"] = int64(len(tr.execs))
	res.Outcome["duplicate executions"] = int64(dups)
	res.Outcome["concurrent duplicate steps"] = int64(tr.concurrent)
	res.Outcome["overlapping acquisitions"] = int64(tr.overlaps)
	res.Outcome["releases ok"] = tr.releaseOK.Load()
	res.Outcome["releases not held"] = tr.releaseNotHeld.Load()
	res.Outcome["release errors"] = tr.releaseErrs.Load()
	res.Outcome["acquire errors"] = tr.acquireErrs.Load()
	res.Outcome["panics"] = tr.panics.Load()
	if tr.panics.Load() != 0 {
		tr.t.Errorf("%d panics", tr.panics.Load())
	}
	return dups
}

// checkLearned asserts that every guard in held ended by deadline and returns the
// latencies from since.
func checkLearned(t *testing.T, what string, held []*guardRec, since, deadline time.Time) []time.Duration {
	t.Helper()
	// Wait (bounded) for the cancellations to be recorded.
	for end := deadline.Add(2 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		all := true
		for _, g := range held {
			if _, ok := g.ended(); !ok {
				all = false
			}
		}
		if all {
			break
		}
	}
	var lat []time.Duration
	for _, g := range held {
		at, ok := g.ended()
		if !ok {
			t.Errorf("%s: a guard acquired at %v never learned it lost the lock", what, g.acquiredAt.Format(time.StampMilli))
			continue
		}
		lat = append(lat, at.Sub(since))
		var lost *efficiencylock.LostError
		if c := context.Cause(g.lock.Context()); !errors.As(c, &lost) {
			t.Errorf("%s: guard ended with cause %v, want *LostError", what, c)
		}
		if at.After(deadline) {
			t.Errorf("%s: guard learned of the loss at +%v, after the deadline +%v", what, at.Sub(since), deadline.Sub(since))
		}
	}
	return lat
}

func TestFaultRedisPausedPastTTL(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "Redis paused (SIGSTOP) past the lock TTL", coordtest.Faults("redis SIGSTOPped"))
	defer coordtest.Report(t, res)
	srv := coordtest.PrivateRedis(t)
	tr := newTrial(t, srv)
	rounds := faultRounds()
	pause := faultTTL + time.Second
	var learned []time.Duration
	var heldAtFault int
	tr.run(rounds, func(int) {
		held := tr.freshHolders(faultPhase())
		heldAtFault += len(held)
		at := time.Now()
		if err := srv.Pause(); err != nil {
			t.Fatalf("pause: %v", err)
		}
		time.Sleep(pause)
		// The last refresh before the pause extended the key to at most
		// at+ttl: the lock is gone on the server by then, and every holder must
		// know within one refresh period of that.
		learned = append(learned, checkLearned(t, "pause", held, at, at.Add(faultTTL+faultPeriod))...)
		if err := srv.Resume(); err != nil {
			t.Fatalf("resume: %v", err)
		}
	})
	st := srv.Stats()
	if st.Pauses != rounds || st.Resumes != rounds {
		t.Fatalf("faults injected: %d pauses, %d resumes; want %d each", st.Pauses, st.Resumes, rounds)
	}
	tr.report(fmt.Sprintf("Redis SIGSTOPped for %v (ttl %v) ×%d", pause, faultTTL, rounds), res)
	slices.Sort(learned)
	res.Trials = rounds
	res.Faults["redis SIGSTOPped"] = st.Pauses
	recordLearned(res, heldAtFault, learned)
	res.Notes = fmt.Sprintf("%d workers, ttl %v, auto-refresh every %v, pause %v; duplicates are expected (an efficiency lock): the assertions are that every holder learned of the loss within ttl + one refresh period, typed errors, no panic",
		faultWorkers, faultTTL, faultPeriod, pause)
	t.Logf("pause: %d guards held the lock at the pauses; each learned of the loss %v after the pause began (ttl %v, refresh period %v)",
		heldAtFault, learned, faultTTL, faultPeriod)
}

func TestFaultRedisRestartedEmpty(t *testing.T) {
	t.Parallel()
	res := coordtest.NewResult(t, "Redis restarted empty under a held lock", coordtest.Faults("redis restarted empty"))
	defer coordtest.Report(t, res)
	srv := coordtest.PrivateRedis(t)
	tr := newTrial(t, srv)
	rounds := faultRounds()
	var learned []time.Duration
	var heldAtFault int
	tr.run(rounds, func(int) {
		held := tr.freshHolders(faultPhase())
		heldAtFault += len(held)
		at := time.Now()
		srv.RestartEmpty(t)
		// The key vanished at `at`; each holder's next refresh (at most one
		// period away) finds it gone or fails.
		learned = append(learned, checkLearned(t, "restart", held, at, at.Add(faultPeriod+faultSlack))...)
	})
	st := srv.Stats()
	if st.Starts != rounds+1 || st.Kills < rounds {
		t.Fatalf("faults injected: %d starts, %d kills; want %d restarts", st.Starts, st.Kills, rounds)
	}
	tr.report(fmt.Sprintf("Redis restarted empty ×%d (ttl %v)", rounds, faultTTL), res)
	slices.Sort(learned)
	res.Trials = rounds
	res.Faults["redis restarted empty"] = st.Kills
	recordLearned(res, heldAtFault, learned)
	res.Notes = fmt.Sprintf("%d workers, ttl %v, auto-refresh every %v; duplicates are expected (an efficiency lock): the assertions are that every holder learned of the loss within one refresh period (+%v slack), typed errors, no panic",
		faultWorkers, faultTTL, faultPeriod, faultSlack)
	t.Logf("restart: %d guards held the lock at the restarts; each learned of the loss %v after the kill (refresh period %v)",
		heldAtFault, learned, faultPeriod)
}

// recordLearned records how many guards held the lock at the faults and how
// soon (sorted latencies) they learned of the loss.
func recordLearned(res *coordtest.Result, heldAtFault int, learned []time.Duration) {
	res.Outcome["guards holding at the fault"] = int64(heldAtFault)
	res.Outcome["guards that learned of the loss"] = int64(len(learned))
	if len(learned) > 0 {
		res.Outcome["learned loss max ms"] = learned[len(learned)-1].Milliseconds()
	}
}

// Redis down: acquisitions fail with the transport error (never ErrNotAcquired), a
// retrying Acquire ends with its context and reports the last transport error, and
// a held guard learns of the loss at its next refresh.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv := coordtest.PrivateRedis(t)
	l := newLocker(t, srv.Client(t), "down", efficiencylock.Config{})
	ctx := ctxT(t, 30*time.Second)
	held, err := l.TryAcquire(ctx, "held", time.Second, &efficiencylock.LockOpts{AutoRefresh: ptr(true)})
	if err != nil {
		t.Fatal(err)
	}
	var lostAt atomic.Int64
	stop := context.AfterFunc(held.Context(), func() { lostAt.Store(time.Now().UnixNano()) })
	defer stop()
	srv.Kill()
	killed := time.Now()
	if st := srv.Stats(); st.Kills != 1 {
		t.Fatalf("kills = %d, want 1", st.Kills)
	}

	_, err = l.TryAcquire(ctx, "x", time.Second, nil)
	if err == nil || errors.Is(err, efficiencylock.ErrNotAcquired) {
		t.Fatalf("TryAcquire with Redis down = %v, want a transport error", err)
	}
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = l.Acquire(short, "x", time.Second, nil)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, efficiencylock.ErrNotAcquired) || !strings.Contains(err.Error(), "last attempt") {
		t.Fatalf("Acquire with Redis down = %v, want DeadlineExceeded with the last transport error", err)
	}

	select {
	case <-held.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("held guard never learned Redis was gone")
	}
	var lost *efficiencylock.LostError
	if c := context.Cause(held.Context()); !errors.As(c, &lost) {
		t.Fatalf("cause = %v, want *LostError", c)
	}
	for lostAt.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	after := time.Duration(lostAt.Load() - killed.UnixNano())
	t.Logf("held guard (ttl 1s, refresh every 333ms) lost %v after the kill: %v", after, context.Cause(held.Context()))
	if after > time.Second+faultSlack {
		t.Errorf("held guard learned of the loss %v after the kill, later than its ttl (1s) plus %v slack", after, faultSlack)
	}
	if err := held.Release(ctx); err == nil || errors.Is(err, efficiencylock.ErrNotHeld) {
		t.Fatalf("Release with Redis down = %v, want a transport error", err)
	}
}
