package efficiencylock

import (
	"context"
	"time"
)

// TryAcquireWith is TryAcquire with per-call options, kept so that programs
// written before TryAcquire took them still compile.
//
// Deprecated: use TryAcquire(ctx, name, ttl, opts); TryAcquireWith goes in v0.2.0.
func (l *Locker) TryAcquireWith(ctx context.Context, name string, ttl time.Duration, opts *LockOpts) (*Lock, error) {
	return l.TryAcquire(ctx, name, ttl, opts)
}

// AcquireWith is Acquire with a retry strategy and per-call options, kept so that
// programs written before Acquire took *LockOpts still compile. A nil retry is
// the Config's.
//
// Deprecated: use Acquire(ctx, name, ttl, &LockOpts{Retry: retry}); AcquireWith
// goes in v0.2.0.
func (l *Locker) AcquireWith(ctx context.Context, name string, ttl time.Duration, retry RetryStrategy, opts *LockOpts) (*Lock, error) {
	o := LockOpts{Retry: retry}
	if opts != nil {
		o.AutoRefresh = opts.AutoRefresh
		if retry == nil {
			o.Retry = opts.Retry
		}
	}
	return l.Acquire(ctx, name, ttl, &o)
}
