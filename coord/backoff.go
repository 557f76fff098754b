package coord

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff defaults from RFC-COORD-001 MUST 6.
const (
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffCap  = 30 * time.Second
)

// Backoff is full-jitter exponential backoff: the delay before retry n (counting
// from 0) is uniform in [0, min(Cap, Base·2ⁿ)). Full jitter spreads a crowd of
// clients that failed together so they do not return together. The zero value
// uses DefaultBackoffBase and DefaultBackoffCap. Backoff never gives up by itself:
// bound it with a context or a count.
type Backoff struct {
	Base time.Duration // first ceiling; default 100 ms
	Cap  time.Duration // largest ceiling; default 30 s
	// Rand returns a uniform value in [0, n). Default: math/rand/v2. Tests may set it
	// to make the schedule deterministic.
	Rand func(n int64) int64
}

// Ceiling returns the upper bound of the delay before retry n.
func (b Backoff) Ceiling(n int) time.Duration {
	base, limit := b.Base, b.Cap
	if base <= 0 {
		base = DefaultBackoffBase
	}
	if limit <= 0 {
		limit = DefaultBackoffCap
	}
	if limit < base {
		limit = base
	}
	d := base
	for i := 0; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Delay returns a random delay for retry n: uniform in [0, Ceiling(n)).
func (b Backoff) Delay(n int) time.Duration {
	c := int64(b.Ceiling(n))
	if b.Rand != nil {
		return time.Duration(b.Rand(c))
	}
	return time.Duration(rand.Int64N(c))
}

// NextBackoff returns Delay(n) and true: a Backoff never gives up by itself.
// It makes a Backoff a retry strategy as packages above the floor take one
// (efficiencylock.RetryStrategy), so there is one backoff in coordkit.
func (b Backoff) NextBackoff(n int) (time.Duration, bool) { return b.Delay(n), true }

// Wait blocks for Delay(n) on clock c (nil means the system clock). It returns
// early with context.Cause(ctx) when ctx is done.
func (b Backoff) Wait(ctx context.Context, c Clock, n int) error {
	t := OrSystem(c).NewTimer(b.Delay(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C():
		return nil
	}
}
