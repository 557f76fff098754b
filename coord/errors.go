package coord

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// The error classes of the SDK. Every coordkit package returns errors that match one
// of these with errors.Is when the condition applies, wrapped with context.
var (
	// ErrStaleToken: a resource saw a newer token for the lease than the one
	// presented. The presenter is no longer the holder: step down, never retry.
	// Returned as *StaleTokenError.
	ErrStaleToken = errors.New("coord: stale fencing token")

	// ErrAuthorityLost: the caller's lease can no longer be trusted (session
	// expired, renewal deadline passed, key deleted, cancelled). Stop writing.
	// Returned as *AuthorityLostError.
	ErrAuthorityLost = errors.New("coord: authority lost")

	// ErrNoLeader: etcd answered that it has no leader — the member reached is cut
	// off from its quorum, or an election is in progress. Nothing was done; retry
	// later (the client may reach another member). Returned, wrapping etcd's own
	// error, by correctnesslease and failstatic.
	ErrNoLeader = errors.New("coord: etcd has no leader")

	// ErrQuotaExceeded: a tenant exceeded a client-side quota (value size or write
	// rate). This is a bug or a runaway in the tenant's code: do not retry fast.
	// Returned as *QuotaError.
	ErrQuotaExceeded = errors.New("coord: quota exceeded")

	// ErrCompacted: a watch or read asked for a revision etcd has compacted away.
	// Re-list (read everything at a current revision) and watch from there —
	// failstatic and correctnesslease.Observe do so themselves; failstatic reports
	// it in Status().LastError.
	ErrCompacted = errors.New("coord: revision compacted")

	// ErrInvalidName: a tenant or resource name failed validation.
	// Returned as *NameError.
	ErrInvalidName = errors.New("coord: invalid name")
)

// StaleTokenError reports a rejected fencing token. It matches ErrStaleToken.
type StaleTokenError struct {
	Presented Token // the token the writer presented
	Highest   Token // the highest token the resource has accepted for the lease
}

// Error names the presented and the highest token.
func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("coord: stale fencing token %s: resource has seen %s", e.Presented, e.Highest)
}

// Is makes errors.Is(err, ErrStaleToken) true.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Retryable is false: the presenter is no longer the holder.
func (e *StaleTokenError) Retryable() bool { return false }

// LossReason says why a lease lost its authority.
type LossReason string

// The reasons authority can be lost.
const (
	// LossSessionExpired: etcd answered that the session's lease no longer exists
	// (expired or revoked), or refused the keepalive (permission, auth).
	LossSessionExpired LossReason = "session_expired"
	// LossRenewalDeadline: no keepalive succeeded for 2/3 of the TTL, measured on the
	// monotonic clock from when it was sent; the holder steps down before etcd can
	// expire the lease and hand it to someone else.
	LossRenewalDeadline LossReason = "renewal_deadline"
	// LossKeyDeleted: the holder's key was deleted or re-created by someone else.
	LossKeyDeleted LossReason = "key_deleted"
	// LossReleased: the holder released the lease or closed the session.
	LossReleased LossReason = "released"
	// LossCancelled: the caller's context was cancelled.
	LossCancelled LossReason = "cancelled"
	// LossStaleToken: a resource rejected the holder's token (ErrStaleToken): a
	// newer holder has written, so this one stepped down although etcd still
	// showed it first.
	LossStaleToken LossReason = "stale_token"
)

// AuthorityLostError reports the loss of a lease's authority. It matches
// ErrAuthorityLost and unwraps to its underlying cause, if any.
type AuthorityLostError struct {
	Lease  string     // lease name (election prefix); empty when a whole session was lost
	Reason LossReason // why
	Err    error      // underlying cause, may be nil
}

// Error names the lease, the reason and the cause.
func (e *AuthorityLostError) Error() string {
	s := "coord: authority lost"
	if e.Lease != "" {
		s += " on " + e.Lease
	}
	s += ": " + string(e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrAuthorityLost) true.
func (e *AuthorityLostError) Is(target error) bool { return target == ErrAuthorityLost }

// Unwrap returns the underlying cause.
func (e *AuthorityLostError) Unwrap() error { return e.Err }

// Retryable is false, whatever the cause: the lease is gone; acquire a new one.
func (e *AuthorityLostError) Retryable() bool { return false }

// QuotaError reports a client-side quota violation. It matches ErrQuotaExceeded.
type QuotaError struct {
	Tenant string // the tenant whose quota was exceeded
	Quota  string // "value_bytes" or "writes_per_second"
	Limit  int64  // the configured limit
	Got    int64  // what the request needed (bytes) or 0 for a rate
}

// Error names the tenant, the quota and its limit.
func (e *QuotaError) Error() string {
	if e.Got > 0 {
		return fmt.Sprintf("coord: quota exceeded for tenant %q: %s %d > limit %d", e.Tenant, e.Quota, e.Got, e.Limit)
	}
	return fmt.Sprintf("coord: quota exceeded for tenant %q: %s limit %d", e.Tenant, e.Quota, e.Limit)
}

// Is makes errors.Is(err, ErrQuotaExceeded) true.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// Retryable is false: a tenant over its quota has a bug or a runaway to fix first.
func (e *QuotaError) Retryable() bool { return false }

// NameError reports an invalid tenant or resource name. It matches ErrInvalidName.
type NameError struct {
	Field  string // "tenant", "name", "kind"
	Value  string // the offending value, truncated to 64 bytes
	Reason string // what is wrong with it
}

// Error names the field, the value and what is wrong with it.
func (e *NameError) Error() string {
	return fmt.Sprintf("coord: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidName) true.
func (e *NameError) Is(target error) bool { return target == ErrInvalidName }

// Retryable is false: the same name is refused again.
func (e *NameError) Retryable() bool { return false }

// RetryableError is implemented by errors that know whether retrying the
// operation that returned them can succeed. Every coordkit package's typed and
// sentinel errors implement it where the answer is yes; Retryable honours it.
type RetryableError interface {
	error
	Retryable() bool
}

// Retryable reports whether retrying the operation that returned err, after a
// backoff, can succeed. In order:
//   - false for nil and for a cancelled or expired context (the caller gave up);
//   - the answer of the outermost RetryableError in err's chain (every coordkit
//     package says so for its own errors: idempotency's ErrInFlight and
//     ErrCommitUnknown, efficiencylock's ErrNotAcquired, correctnesslease's
//     ErrHeld, failstatic's ErrStale and ErrNoSnapshot, ...);
//   - true for ErrNoLeader and ErrCompacted (after a re-list);
//   - false for stale tokens, lost authority, quota violations and invalid input;
//   - true for a network timeout; false for anything else.
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if re, ok := errors.AsType[RetryableError](err); ok {
		return re.Retryable()
	}
	switch {
	case errors.Is(err, ErrNoLeader), errors.Is(err, ErrCompacted):
		return true
	case errors.Is(err, ErrStaleToken),
		errors.Is(err, ErrAuthorityLost),
		errors.Is(err, ErrQuotaExceeded),
		errors.Is(err, ErrInvalidName),
		errors.Is(err, ErrInvalidToken):
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
