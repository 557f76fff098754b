package correctnesslease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/coord"
)

// RunOpts tunes Run. A nil *RunOpts means all defaults.
type RunOpts struct {
	// Drain is how long Run waits, after cancelling the work's context on loss
	// of authority, for the work function to return. Default TTL/3 of the
	// session. If the work has not returned by then Run returns
	// ErrDrainExceeded rather than campaign while it may still be writing.
	Drain time.Duration

	// Backoff spaces re-campaigns after a lost term or a failed campaign.
	// Default: the zero coord.Backoff (full jitter, base 100 ms, cap 30 s).
	Backoff coord.Backoff

	// OnElected, if set, is called (in Run's goroutine, before the work starts)
	// each time this process becomes the holder.
	OnElected func(tok coord.Token)

	// OnLost, if set, is called (in Run's goroutine, after the work has returned
	// or the drain expired) each time a term ends, with the reason:
	// LossRenewalDeadline, LossSessionExpired, LossKeyDeleted, LossCancelled,
	// LossStaleToken (the work returned a stale-token error; err wraps it)
	// or LossReleased (the work returned).
	OnLost func(tok coord.Token, reason coord.LossReason, err error)
}

// Run is the leader loop for name: campaign (Acquire), call fn with the lease's
// context and token, and when authority is lost cancel fn's context, wait up to
// Drain for fn to return, then campaign again after a full-jitter backoff. When
// the session is gone (step-down, expiry) Run creates a new one with the same
// client and Config, and closes the sessions it created before returning.
//
// fn must stop writing when its context ends and must send the token with every
// write. When fn returns an error matching coord.ErrStaleToken (a resource has
// seen a newer holder's token), that is a loss of authority like any other: Run
// releases the lease, reports LossStaleToken through OnLost and campaigns again
// after the backoff, which grows while consecutive terms end that way. Run
// returns when ctx ends (with context.Cause(ctx)), when fn returns any other
// result while still holding the lease (its error, nil included: the work is
// done; the lease is released), or with ErrDrainExceeded when fn ignored a
// cancelled context. The session s is not closed by Run.
func Run(ctx context.Context, s *Session, name string, fn func(ctx context.Context, tok coord.Token) error, opts *RunOpts) error {
	if s == nil {
		return &ConfigError{Field: "session", Reason: "nil *Session"}
	}
	if fn == nil {
		return &ConfigError{Field: "fn", Reason: "nil work function"}
	}
	if _, err := coord.Key(s.cfg.Tenant, coord.KindElections, name); err != nil {
		return err
	}
	var o RunOpts
	if opts != nil {
		o = *opts
	}
	if o.Drain <= 0 {
		o.Drain = s.cfg.TTL / 3
	}
	clk := s.cfg.Clock

	sess := s
	defer func() {
		if sess != s {
			closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.KeepaliveTimeout)
			_ = sess.Close(closeCtx)
			cancel()
		}
	}()

	stale := 0 // consecutive terms ended by a stale token
	for attempt := 0; ; attempt++ {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		if attempt > 0 {
			if err := o.Backoff.Wait(ctx, clk, attempt-1); err != nil {
				return err
			}
		}
		if sess.Err() != nil {
			if sess != s {
				closeCtx, cancel := context.WithTimeout(ctx, s.cfg.KeepaliveTimeout)
				_ = sess.Close(closeCtx)
				cancel()
			}
			ns, err := NewSession(ctx, s.cli, s.cfg)
			if err != nil {
				s.cfg.Logger.Warn("correctnesslease: run: new session", "name", name, "err", err)
				sess = s // keep a closed session: the next loop tries again
				continue
			}
			sess = ns
		}
		l, err := Acquire(ctx, sess, name)
		if err != nil {
			if cerr := context.Cause(ctx); cerr != nil {
				return cerr
			}
			var ne *coord.NameError
			if errors.As(err, &ne) {
				return err
			}
			s.cfg.Logger.Info("correctnesslease: run: campaign failed", "name", name, "err", err)
			continue
		}
		attempt = 0
		done, lost, ferr := term(ctx, l, fn, o, sess.in, clk)
		if done {
			return ferr
		}
		if lost.Reason == coord.LossStaleToken {
			stale++
			attempt = stale - 1 // each consecutive stale term backs off further
		} else {
			stale = 0
		}
		if lost.Reason == coord.LossCancelled && context.Cause(ctx) != nil {
			return context.Cause(ctx)
		}
		if errors.Is(ferr, ErrDrainExceeded) {
			return ferr
		}
	}
}

// term runs one term of leadership. done reports that Run must return err.
func term(ctx context.Context, l *Lease, fn func(context.Context, coord.Token) error, o RunOpts,
	in *instruments, clk coord.Clock) (done bool, lost *coord.AuthorityLostError, err error) {
	tok := l.Token()
	in.elected(l.prefix)
	if o.OnElected != nil {
		o.OnElected(tok)
	}
	result := make(chan error, 1)
	go func() { result <- fn(l.Context(), tok) }()

	select {
	case err = <-result:
		if lost = l.lossErr(); lost == nil && errors.Is(err, coord.ErrStaleToken) {
			// A newer holder has written: authority is gone, whatever etcd says.
			l.lose(coord.LossStaleToken, err)
			lost = l.lossErr()
		}
		if lost == nil {
			// The work finished while we held the lease: release and return.
			relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.s.cfg.KeepaliveTimeout)
			_ = l.Release(relCtx)
			cancel()
			if o.OnLost != nil {
				o.OnLost(tok, coord.LossReleased, err)
			}
			return true, nil, err
		}
	case <-l.Context().Done():
		lost = l.lossErr()
		t := clk.NewTimer(o.Drain)
		select {
		case err = <-result:
			t.Stop()
		case <-t.C():
			err = fmt.Errorf("%w: %s after %v (%w)", ErrDrainExceeded, l.prefix, o.Drain, lost)
		}
	}
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.s.cfg.KeepaliveTimeout)
	_ = l.Release(relCtx) // authority is gone; this removes the key if it is still ours
	cancel()
	if o.OnLost != nil {
		o.OnLost(tok, lost.Reason, lost)
	}
	return false, lost, err
}
