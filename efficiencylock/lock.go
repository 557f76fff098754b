package efficiencylock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Lock is the guard of one acquisition. Its methods are safe for concurrent use.
//
// A Lock is valid until the earliest of: its validity estimate running out
// (measured on the local monotonic clock from when the last successful SET or
// refresh was sent, minus a drift allowance), a failed refresh, Redis reporting the
// key gone or someone else's, or Release. Context reports the end. Nothing the
// Lock says is a guarantee that no one else runs the same work: see the package
// documentation.
type Lock struct {
	locker *Locker
	name   string
	key    string
	value  string
	acqCtx context.Context // the acquiring context: its values, never its cancellation, are used

	refreshMu sync.Mutex // serialises refresh round trips (manual and automatic)

	mu         sync.Mutex
	ttl        time.Duration // ttl of the last successful SET or refresh
	validUntil time.Time     // local estimate of the key's expiry, conservative
	lost       *LostError    // non-nil once lost; final
	stopped    bool          // Release was called: no more refreshes; final
	released   bool          // Release confirmed by Redis (deleted, or not ours)
	ctx        context.Context
	cancel     context.CancelCauseFunc
	timer      *time.Timer   // fires at validUntil; only while ctx exists
	done       chan struct{} // closed when the auto-refresh goroutine exits; nil without one
}

// validity returns the conservative local expiry of a key set with ttl by a command
// sent at sent: the drift allowance (1 % of ttl plus 2 ms) covers the server's clock
// rate and timer resolution, so the guard gives up before Redis expires the key.
func validity(sent time.Time, ttl time.Duration) time.Time {
	return sent.Add(ttl - ttl/100 - 2*time.Millisecond)
}

func newLock(ctx context.Context, l *Locker, name, key, value string, ttl time.Duration, sent time.Time, auto bool) *Lock {
	k := &Lock{
		locker: l, name: name, key: key, value: value,
		acqCtx: ctx,
		ttl:    ttl, validUntil: validity(sent, ttl),
	}
	if auto {
		k.mu.Lock()
		k.ensureContextLocked()
		k.done = make(chan struct{})
		ctx := k.ctx
		k.mu.Unlock()
		go k.autoRefresh(ctx)
	}
	return k
}

// parent returns the values of the acquiring context without its cancellation.
func (k *Lock) parent() context.Context { return context.WithoutCancel(k.acqCtx) }

// Name returns the lock's name.
func (k *Lock) Name() string { return k.name }

// Key returns the lock's Redis key, /tenants/{tenant}/locks/{name}.
func (k *Lock) Key() string { return k.key }

// Context returns a context that is cancelled when the guard stops holding the lock:
// with a *LostError cause (ErrLockLost) the moment the validity estimate runs out, a
// refresh fails, or Redis reports the key gone or someone else's; with cause
// ErrReleased on Release. It carries the values of the acquiring context but not its
// cancellation. It does not block. Pass it to the guarded work, and stop when it is
// done (context.Cause says why).
func (k *Lock) Context() context.Context {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ensureContextLocked()
	return k.ctx
}

// ensureContextLocked creates the context (lazily: acquisitions that never ask for
// it cost no timer) and arms the expiry timer.
func (k *Lock) ensureContextLocked() {
	if k.ctx != nil {
		return
	}
	k.ctx, k.cancel = context.WithCancelCause(k.parent())
	switch {
	case k.lost != nil:
		k.cancel(k.lost)
	case k.stopped:
		k.cancel(ErrReleased)
	default:
		k.timer = time.AfterFunc(time.Until(k.validUntil), k.expire)
	}
}

// expire runs when the validity estimate runs out without a refresh extending it.
func (k *Lock) expire() {
	k.mu.Lock()
	if k.lost != nil || k.stopped {
		k.mu.Unlock()
		return
	}
	if d := time.Until(k.validUntil); d > 0 { // extended while the timer fired
		k.timer.Reset(d)
		k.mu.Unlock()
		return
	}
	lost := k.loseLocked(LossExpired, nil)
	k.mu.Unlock()
	k.reportLoss(lost)
}

// loseLocked records the loss (first one wins) and cancels the context. It returns
// the loss to report, or nil when the lock was already lost or released.
func (k *Lock) loseLocked(reason LossReason, err error) *LostError {
	if k.lost != nil || k.stopped {
		return nil
	}
	k.lost = &LostError{Name: k.name, Reason: reason, Err: err}
	if k.timer != nil {
		k.timer.Stop()
	}
	if k.cancel != nil {
		k.cancel(k.lost)
	}
	return k.lost
}

func (k *Lock) reportLoss(lost *LostError) {
	if lost == nil {
		return
	}
	l := k.locker
	ctx := k.parent()
	l.in.lockLost(ctx, lost.Reason)
	l.log.WarnContext(ctx, "efficiencylock: lock lost; another holder may run the same work",
		slog.String("lock", k.name), slog.String("loss", string(lost.Reason)), slog.Any("error", lost.Err))
}

// endedLocked returns the error for an operation on a guard that no longer holds
// its lock, or nil, and the loss to report when the guard is lost just now (its
// validity estimate ran out).
func (k *Lock) endedLocked(op string) (*LostError, error) {
	switch {
	case k.lost != nil:
		return nil, k.lost
	case k.stopped:
		return nil, &NotHeldError{Op: op, Name: k.name, Detail: "released by its holder"}
	case !time.Now().Before(k.validUntil):
		lost := k.loseLocked(LossExpired, nil)
		return lost, lost
	}
	return nil, nil
}

// Refresh extends the lock to ttl from now, if and only if Redis still holds this
// acquisition's value under the key (compare-and-pexpire in Lua: an expired lock is
// never re-created). It blocks for one round trip, bounded by ctx and by the
// guard's validity. It returns nil on success; a *LostError (ErrLockLost) when the
// validity estimate has run out, Redis says the key is gone or someone else's, or
// the round trip failed — the lock is then lost for good and Context is cancelled;
// a *NotHeldError after Release; a *TTLError for ttl < 1 ms; and the wrapped context
// error, without losing the lock, when ctx ends first.
func (k *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	k.refreshMu.Lock()
	defer k.refreshMu.Unlock()
	return k.refresh(ctx, ttl)
}

func (k *Lock) refresh(ctx context.Context, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("efficiencylock: refresh %q: %w", k.name, context.Cause(ctx))
	}
	sent := time.Now()
	k.mu.Lock()
	if lost, err := k.endedLocked("refresh"); err != nil {
		k.mu.Unlock()
		k.refreshFailed(lost)
		return err
	}
	// A shorter ttl may shorten the key's life as soon as the command lands:
	// believe the shorter of the two estimates until the reply says otherwise.
	if v := validity(sent, ttl); v.Before(k.validUntil) {
		k.validUntil = v
		if k.timer != nil {
			k.timer.Reset(time.Until(v))
		}
	}
	until := k.validUntil
	k.mu.Unlock()

	rctx, cancel := context.WithDeadline(ctx, until)
	n, err := refreshScript.run(rctx, k.locker.client, k.key, k.value, ttl.Milliseconds())
	cancel()

	k.mu.Lock()
	var lost *LostError
	switch {
	case k.lost != nil || k.stopped:
		// Lost or released while the command was in flight: the answer changes nothing.
		_, e := k.endedLocked("refresh")
		k.mu.Unlock()
		return e
	case err == nil && n == 1:
		k.ttl = ttl
		k.validUntil = validity(sent, ttl)
		if k.timer != nil {
			k.timer.Reset(time.Until(k.validUntil))
		}
		k.mu.Unlock()
		return nil
	case err == nil:
		lost = k.loseLocked(LossGone, nil)
	case ctx.Err() != nil:
		// The caller gave up; the estimate already covers whatever Redis did.
		k.mu.Unlock()
		return fmt.Errorf("efficiencylock: refresh %q: %w", k.name, context.Cause(ctx))
	case errors.Is(err, context.DeadlineExceeded) || !time.Now().Before(until):
		lost = k.loseLocked(LossExpired, err)
	default:
		lost = k.loseLocked(LossRefreshFailed, err)
	}
	e := error(k.lost)
	k.mu.Unlock()
	k.refreshFailed(lost)
	return e
}

// refreshFailed counts a refresh that found the lock lost and reports the loss.
func (k *Lock) refreshFailed(lost *LostError) {
	if lost == nil {
		return
	}
	k.locker.in.refreshFailed(k.parent(), lost.Reason)
	k.reportLoss(lost)
}

// autoRefresh refreshes every ttl/3 until the context ends (loss or Release).
func (k *Lock) autoRefresh(ctx context.Context) {
	defer close(k.done)
	k.mu.Lock()
	period := k.ttl / 3
	k.mu.Unlock()
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		ttl := k.ttl
		k.mu.Unlock()
		k.refreshMu.Lock()
		err := k.refresh(ctx, ttl)
		k.refreshMu.Unlock()
		if err != nil && ctx.Err() != nil {
			return
		}
		// A failed refresh always ends the context; anything else retries on time.
		t.Reset(ttl / 3)
	}
}

// TTL returns how long Redis will keep the lock, if the key still holds this
// acquisition's value (compare-and-pttl in Lua). It blocks for one round trip,
// bounded by ctx. It returns a *LostError (ErrLockLost) — and cancels Context —
// when the guard was already lost or Redis says the key is gone or someone else's,
// a *NotHeldError after Release, and the wrapped Redis or context error otherwise
// (which does not by itself lose the lock). A key without expiry (someone ran
// PERSIST on it) reports -1.
func (k *Lock) TTL(ctx context.Context) (time.Duration, error) {
	k.mu.Lock()
	if lost, err := k.endedLocked("ttl"); err != nil {
		k.mu.Unlock()
		k.reportLoss(lost)
		return 0, err
	}
	k.mu.Unlock()
	n, err := pttlScript.run(ctx, k.locker.client, k.key, k.value)
	if err != nil {
		return 0, fmt.Errorf("efficiencylock: ttl %q: %w", k.name, err)
	}
	if n == -3 {
		k.mu.Lock()
		lost := k.loseLocked(LossGone, nil)
		_, e := k.endedLocked("ttl")
		k.mu.Unlock()
		k.reportLoss(lost)
		return 0, e
	}
	if n < 0 {
		return time.Duration(n), nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Release stops the guard (Context is cancelled with cause ErrReleased unless it
// was already lost, and auto-refresh stops), then deletes the key if and only if it
// still holds this acquisition's value (compare-and-delete in Lua): it never
// deletes another holder's lock. It blocks until the auto-refresh goroutine, if
// any, has exited and for one round trip, both bounded by ctx. It returns nil when
// it deleted the key; a *NotHeldError (ErrNotHeld) when the key had expired or
// belonged to someone else, or Release already succeeded; and the wrapped Redis or
// context error otherwise, in which case Release may be called again (the key
// expires by itself after its ttl anyway).
func (k *Lock) Release(ctx context.Context) error {
	k.mu.Lock()
	if k.released {
		k.mu.Unlock()
		return &NotHeldError{Op: "release", Name: k.name, Detail: "already released"}
	}
	if !k.stopped {
		k.stopped = true
		if k.timer != nil {
			k.timer.Stop()
		}
		if k.cancel != nil && k.lost == nil {
			k.cancel(ErrReleased)
		}
	}
	done := k.done
	k.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			return fmt.Errorf("efficiencylock: release %q: %w", k.name, context.Cause(ctx))
		}
	}
	n, err := releaseScript.run(ctx, k.locker.client, k.key, k.value)
	if err != nil {
		return fmt.Errorf("efficiencylock: release %q: %w", k.name, err)
	}
	k.mu.Lock()
	already := k.released
	k.released = true
	k.mu.Unlock()
	l := k.locker
	if n == 1 { // this call deleted the key, whatever a concurrent Release recorded
		if l.log.Enabled(ctx, slog.LevelDebug) {
			l.log.DebugContext(ctx, "efficiencylock: released", slog.String("lock", k.name))
		}
		return nil
	}
	if already {
		return &NotHeldError{Op: "release", Name: k.name, Detail: "already released"}
	}
	return &NotHeldError{Op: "release", Name: k.name, Detail: "key absent or held by another acquisition"}
}
