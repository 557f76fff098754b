package efficiencylock

import (
	"time"

	"github.com/coordkit/coordkit/coord"
)

// Default retry schedule of Acquire: full jitter between 10 ms and 500 ms. Locks
// in this package guard short, repeatable work, so the ceiling is kept low: a
// waiter notices a release within about half a second, while a crowd of waiters
// still spreads out instead of hammering Redis in step.
const (
	DefaultRetryBase = 10 * time.Millisecond
	DefaultRetryCap  = 500 * time.Millisecond
)

// RetryStrategy decides how long Acquire waits between attempts: a
// coord.Backoff (full jitter, forever), NoRetry, or LimitRetry around either.
// Implementations must be safe for concurrent use (these are stateless values).
type RetryStrategy interface {
	// NextBackoff returns the delay before retry n (n = 0 after the first failed
	// attempt) and false to stop retrying.
	NextBackoff(n int) (time.Duration, bool)
}

// NoRetry makes Acquire behave like TryAcquire: one attempt.
func NoRetry() RetryStrategy { return noRetry{} }

type noRetry struct{}

func (noRetry) NextBackoff(int) (time.Duration, bool) { return 0, false }

// FullJitter retries forever (bounded only by the context) with full-jitter
// exponential backoff: the delay before retry n is uniform in
// [0, min(ceiling, base·2ⁿ)). base ≤ 0 means DefaultRetryBase, ceiling ≤ 0
// DefaultRetryCap.
//
// Deprecated: use coord.Backoff{Base: base, Cap: ceiling}, which is a
// RetryStrategy (coordkit has one backoff).
func FullJitter(base, ceiling time.Duration) RetryStrategy {
	if base <= 0 {
		base = DefaultRetryBase
	}
	if ceiling <= 0 {
		ceiling = DefaultRetryCap
	}
	return coord.Backoff{Base: base, Cap: ceiling}
}

// DefaultRetry is coord.Backoff{Base: DefaultRetryBase, Cap: DefaultRetryCap}:
// full jitter from 10 ms to 500 ms until ctx ends, the strategy Acquire uses
// when neither LockOpts.Retry nor Config.Retry is set.
func DefaultRetry() RetryStrategy { return coord.Backoff{Base: DefaultRetryBase, Cap: DefaultRetryCap} }

// LimitRetry stops s after max retries (max+1 attempts in all). A nil s means
// DefaultRetry().
func LimitRetry(s RetryStrategy, max int) RetryStrategy {
	if s == nil {
		s = DefaultRetry()
	}
	return limitRetry{s: s, max: max}
}

type limitRetry struct {
	s   RetryStrategy
	max int
}

func (l limitRetry) NextBackoff(n int) (time.Duration, bool) {
	if n >= l.max {
		return 0, false
	}
	return l.s.NextBackoff(n)
}
