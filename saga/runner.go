package saga

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Run drives sagas of the registered types until ctx is cancelled: it claims due
// sagas (FOR UPDATE SKIP LOCKED, an owner token with expiry and a claim_version
// fence), runs up to Config.Concurrency of them at once, and wakes on NOTIFY with
// a Config.PollInterval polling fallback. Any number of processes may Run on the
// same table. It blocks; cancelling ctx cancels in-flight step calls, releases
// their claims (an interrupted attempt is not counted) and returns nil once every
// goroutine has stopped. It returns an error at once when no definition is
// registered. Database errors are logged and retried with backoff, never returned.
func (c *Client) Run(ctx context.Context) error {
	types := c.types()
	if len(types) == 0 {
		return fmt.Errorf("%w: Run with no registered definition", ErrInvalidConfig)
	}
	r := &runner{c: c, types: types, wake: make(chan struct{}, 1), rearm: make(chan struct{}, 1), done: make(chan struct{}, c.cfg.Concurrency)}
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(ctx) })
	r.loop(ctx)
	wg.Wait()
	return nil
}

type runner struct {
	c     *Client
	types []string
	wake  chan struct{} // NOTIFY or reconnect: look for work
	rearm chan struct{} // a retry was scheduled: recompute the timer
	done  chan struct{} // a driven saga was let go

	mu       sync.Mutex
	earliest time.Time // earliest retry this runner scheduled
}

func (r *runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// retryAt asks the loop to look for due work at t (a retry this runner scheduled).
func (r *runner) retryAt(t time.Time) {
	r.mu.Lock()
	if r.earliest.IsZero() || t.Before(r.earliest) {
		r.earliest = t
	}
	r.mu.Unlock()
	select {
	case r.rearm <- struct{}{}:
	default:
	}
}

func (r *runner) loop(ctx context.Context) {
	cfg := r.c.cfg
	inflight := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	claimNow, failures := true, 0
	for {
		r.mu.Lock()
		if !r.earliest.IsZero() && !time.Now().Before(r.earliest) {
			r.earliest, claimNow = time.Time{}, true // a retry we scheduled is due
		}
		r.mu.Unlock()
		if claimNow && inflight < cfg.Concurrency && ctx.Err() == nil {
			free := cfg.Concurrency - inflight
			got, err := r.c.claim(ctx, r.types, free)
			switch {
			case err != nil && ctx.Err() == nil:
				cfg.Logger.WarnContext(ctx, "saga: claim failed", "err", err)
				failures++
			case err == nil:
				failures = 0
			}
			for _, s := range got {
				r.c.stats.claims.Add(1)
				inflight++
				wg.Go(func() {
					r.drive(ctx, s)
					r.done <- struct{}{}
				})
			}
			// A full batch means more may be due: claim again when a slot frees.
			claimNow = err == nil && len(got) == free
		}
		wait := cfg.PollInterval
		if failures > 0 {
			wait = cfg.Backoff.Delay(failures - 1)
		}
		r.mu.Lock()
		if !r.earliest.IsZero() {
			if d := time.Until(r.earliest); d < wait {
				wait = max(d, 0)
			}
		}
		r.mu.Unlock()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			for ; inflight > 0; inflight-- {
				<-r.done
			}
			return
		case <-r.done:
			inflight--
		case <-r.wake:
			claimNow = true
		case <-r.rearm: // recompute the timer
		case <-timer.C:
			claimNow = true
		}
	}
}

// listen wakes the loop on every NOTIFY on the table's channel, reconnecting with
// backoff; polling covers the gaps.
func (r *runner) listen(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.c.cfg.Logger.WarnContext(ctx, "saga: LISTEN connection lost; polling until it is back", "err", err)
		r.poke()
		if r.c.cfg.Backoff.Wait(ctx, nil, min(n, 10)) != nil {
			return
		}
	}
}

func (r *runner) listenOnce(ctx context.Context) error {
	pc, err := r.c.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack() // a listening connection never goes back to the pool
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, r.c.q.listen); err != nil {
		return err
	}
	r.poke() // anything started while we were not listening
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		r.poke()
	}
}
