package efficiencylock

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/internal/sentinel"
)

// Sentinel errors. Every error the package returns for these conditions matches
// one of them with errors.Is; the typed errors below carry the details.
var (
	// ErrNotAcquired: someone else holds the lock. Returned as *NotAcquiredError by
	// TryAcquire (one attempt) and by Acquire when its retry strategy gives up; when
	// Acquire's context ends while the lock is still held by someone else, the
	// error is errors.Join(*NotAcquiredError, context.Cause(ctx)) and matches both.
	// It never matches context.Canceled or context.DeadlineExceeded by itself.
	ErrNotAcquired = sentinel.Retryable("efficiencylock: not acquired")

	// ErrLockLost: a guard lost its lock (expired before a refresh succeeded, a
	// refresh failed, or Redis says the key is gone or someone else's). Returned
	// as *LostError by Refresh and TTL, and the cause of Lock.Context.
	ErrLockLost = errors.New("efficiencylock: lock lost")

	// ErrNotHeld: Release found that the key is not (or no longer) this guard's,
	// or the guard was already released; nothing was deleted. Refresh and TTL
	// return it after Release. Returned as *NotHeldError.
	ErrNotHeld = errors.New("efficiencylock: lock not held")

	// ErrReleased is the cause of Lock.Context after a Release by the holder.
	ErrReleased = errors.New("efficiencylock: released")

	// ErrInvalidTTL: a ttl below one millisecond. Returned as *TTLError.
	ErrInvalidTTL = errors.New("efficiencylock: invalid ttl")

	// ErrInvalidReason: New was given an empty (or too long, or non-UTF-8)
	// declared reason. Returned as *ReasonError.
	ErrInvalidReason = errors.New("efficiencylock: invalid reason")

	// ErrInvalidConfig: New was given an invalid Config field or a nil client.
	// Returned as *ConfigError.
	ErrInvalidConfig = errors.New("efficiencylock: invalid config")
)

// ConfigError reports an invalid Config field. It matches ErrInvalidConfig and,
// for an invalid Tenant, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the Config field, e.g. "Tenant", or the argument ("client")
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return "efficiencylock: invalid config " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// NotAcquiredError reports that a lock was held by someone else. It matches
// ErrNotAcquired and unwraps to the last Redis error seen while retrying, if any.
type NotAcquiredError struct {
	Name     string // lock name
	Attempts int    // SET NX attempts made
	Err      error  // last transport error seen between attempts; usually nil
}

// Error names the lock, the attempts and the last transport error.
func (e *NotAcquiredError) Error() string {
	s := "efficiencylock: lock " + strconv.Quote(e.Name) + " not acquired after " + strconv.Itoa(e.Attempts) + " attempt"
	if e.Attempts != 1 {
		s += "s"
	}
	if e.Err != nil {
		s += " (last error: " + e.Err.Error() + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrNotAcquired) true.
func (e *NotAcquiredError) Is(target error) bool { return target == ErrNotAcquired }

// Unwrap returns the last transport error, if any.
func (e *NotAcquiredError) Unwrap() error { return e.Err }

// Retryable is true: the holder will release or its lock will expire.
func (e *NotAcquiredError) Retryable() bool { return true }

// LossReason says why a guard lost its lock.
type LossReason string

// The reasons a guard loses its lock.
const (
	// LossExpired: the validity estimate ran out before a refresh succeeded (Redis
	// paused or unreachable, or nobody refreshed).
	LossExpired LossReason = "expired"
	// LossGone: Redis answered that the key no longer exists or holds another
	// acquisition's value (expired, restarted empty, failed over, or deleted).
	LossGone LossReason = "gone"
	// LossRefreshFailed: a refresh returned an error, so the lock cannot be
	// trusted any more.
	LossRefreshFailed LossReason = "refresh_failed"
)

// LostError reports the loss of a lock. It matches ErrLockLost and unwraps to the
// underlying error (for LossRefreshFailed), if any.
type LostError struct {
	Name   string     // lock name
	Reason LossReason // why
	Err    error      // underlying cause; nil for LossExpired and LossGone
}

// Error names the lock, the reason and the cause.
func (e *LostError) Error() string {
	s := "efficiencylock: lock " + strconv.Quote(e.Name) + " lost: " + string(e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrLockLost) true.
func (e *LostError) Is(target error) bool { return target == ErrLockLost }

// Unwrap returns the underlying cause.
func (e *LostError) Unwrap() error { return e.Err }

// NotHeldError reports a Release of a lock that is not this guard's, or a Refresh
// or TTL after Release. It matches ErrNotHeld.
type NotHeldError struct {
	Op     string // "release", "refresh" or "ttl"
	Name   string // lock name
	Detail string // "key absent or held by another acquisition", "already released", "released by its holder"
}

// Error names the operation, the lock and why it is not held.
func (e *NotHeldError) Error() string {
	return "efficiencylock: " + e.Op + " " + strconv.Quote(e.Name) + ": not held: " + e.Detail
}

// Is makes errors.Is(err, ErrNotHeld) true.
func (e *NotHeldError) Is(target error) bool { return target == ErrNotHeld }

// TTLError reports an invalid ttl. It matches ErrInvalidTTL.
type TTLError struct {
	TTL time.Duration
}

// Error names the refused ttl.
func (e *TTLError) Error() string {
	return fmt.Sprintf("efficiencylock: invalid ttl %v: must be at least 1ms", e.TTL)
}

// Is makes errors.Is(err, ErrInvalidTTL) true.
func (e *TTLError) Is(target error) bool { return target == ErrInvalidTTL }

// ReasonError reports an unusable declared reason. It matches ErrInvalidReason.
type ReasonError struct {
	Reason  string // the offending reason, truncated
	Problem string // what is wrong with it
}

// Error names the refused reason and the problem.
func (e *ReasonError) Error() string {
	return "efficiencylock: invalid DuplicatesHarmless reason " + strconv.Quote(e.Reason) + ": " + e.Problem
}

// Is makes errors.Is(err, ErrInvalidReason) true.
func (e *ReasonError) Is(target error) bool { return target == ErrInvalidReason }

func checkTTL(ttl time.Duration) error {
	if ttl < time.Millisecond {
		return &TTLError{TTL: ttl}
	}
	return nil
}
