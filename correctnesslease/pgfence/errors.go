package pgfence

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/coord"

	"github.com/coordkit/coordkit/internal/sentinel"
)

// ErrZeroToken is returned when a write presents the zero coord.Token. It also
// matches coord.ErrInvalidToken. Nothing is written.
var ErrZeroToken = fmt.Errorf("pgfence: zero fencing token: %w", coord.ErrInvalidToken)

// ErrNotFound is returned (wrapped) by [Fence.FenceGet] when the lease has no
// fence row: it has never presented a token, so any token is accepted.
var ErrNotFound = errors.New("pgfence: not found")

// ErrRowNotFound is returned (wrapped) by [RowUpdater.Update] when no row has the
// given key, as opposed to a row whose fence is newer than the token (which is a
// [*coord.StaleTokenError]).
var ErrRowNotFound = errors.New("pgfence: no row matches the key")

// staleError builds the typed rejection. The highest token is parsed from the wire
// form: a resource learns tokens, it never mints them.
func staleError(presented coord.Token, highest int64) error {
	s := presented.String()
	wire := s[:len(s)-len(fmt.Sprint(presented.Revision()))] + fmt.Sprint(highest)
	h, err := coord.ParseToken(wire)
	if err != nil { // cannot happen: same lease, positive revision
		return fmt.Errorf("pgfence: stale token %s (highest revision %d): %w", presented, highest, coord.ErrStaleToken)
	}
	return &coord.StaleTokenError{Presented: presented, Highest: h}
}

// ErrBusy matches every *BusyError: the lease's fence row stayed locked by another
// transaction for the whole LockTimeout. Retry after a backoff.
var ErrBusy = sentinel.Retryable("pgfence: fence row busy")

// BusyError is returned by GuardTx (and so Exec) when the lease's fence row was
// locked by another transaction for Config.LockTimeout — typically a holder
// frozen inside its fenced transaction, which PostgreSQL ends once it has been
// idle for Config.IdleTimeout. Nothing was written: roll back and retry after a
// backoff. It matches ErrBusy and unwraps to the database's lock_not_available
// error.
type BusyError struct {
	Token  coord.Token   // the token presented
	Waited time.Duration // the LockTimeout that expired
	Err    error         // the database's error (SQLSTATE 55P03)
}

// Error names the lease, how long the guard waited and the database error.
func (e *BusyError) Error() string {
	return fmt.Sprintf("pgfence: fence row of %q busy: another transaction held it for %v (guarding %s): %v",
		e.Token.Lease(), e.Waited, e.Token, e.Err)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Unwrap returns the database's error.
func (e *BusyError) Unwrap() error { return e.Err }

// Retryable reports true: the transaction holding the row ends (it commits, or
// PostgreSQL ends it after IdleTimeout), and a retry then proceeds.
func (e *BusyError) Retryable() bool { return true }

// ErrIdleTimeout matches every *IdleError; coord.Retryable reports true for it.
var ErrIdleTimeout = sentinel.Retryable("pgfence: fenced transaction ended idle")

// IdleError is returned by Exec when PostgreSQL ended its fenced transaction
// because it sat idle for Config.IdleTimeout — between fn's statements or
// before COMMIT, its process paused, starved of CPU or waiting on something
// outside the transaction. The ending is the fence working: the row lock is
// freed for the lease's next holder. Nothing the transaction wrote committed:
// retry, as any fenced write, with the token of a lease still held. It matches
// ErrIdleTimeout and unwraps to the database's error (SQLSTATE 25P03). In a
// transaction of your own guarded with GuardTx, the same ending surfaces as that
// SQLSTATE from your next statement.
type IdleError struct {
	Token       coord.Token   // the token presented
	IdleTimeout time.Duration // Config.IdleTimeout; 0: the server's own setting ended it (IdleTimeout negative)
	Err         error         // the database's error (SQLSTATE 25P03)
}

// Error names the lease, the idle timeout and the database error.
func (e *IdleError) Error() string {
	idle := "the server's idle_in_transaction_session_timeout"
	if e.IdleTimeout > 0 {
		idle = e.IdleTimeout.String()
	}
	return fmt.Sprintf("pgfence: fenced transaction of %q ended by the database after %s idle (guarded by %s); nothing committed: %v",
		e.Token.Lease(), idle, e.Token, e.Err)
}

// Is makes errors.Is(err, ErrIdleTimeout) true.
func (e *IdleError) Is(target error) bool { return target == ErrIdleTimeout }

// Unwrap returns the database's error.
func (e *IdleError) Unwrap() error { return e.Err }

// Retryable reports true: nothing committed, and the fence row is free.
func (e *IdleError) Retryable() bool { return true }

// ErrInvalidConfig matches every *ConfigError.
var ErrInvalidConfig = errors.New("pgfence: invalid config")

// ConfigError reports an invalid Config (or RowSpec) field. It matches
// ErrInvalidConfig and, for an invalid name, unwraps to a *coord.NameError
// (coord.ErrInvalidName).
type ConfigError struct {
	Field  string // the field the caller set, e.g. "Table"
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string { return "pgfence: invalid config " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// nameError reports an invalid identifier as the ConfigError of its field.
func nameError(ne *coord.NameError) *ConfigError {
	return &ConfigError{Field: ne.Field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
}

// ErrCommitUnknown is returned (wrapped) by Exec when the connection failed, or
// ctx ended, while COMMIT was in flight: the fenced writes may or may not have
// committed. Resolve it by the effect itself — retry with the same idempotency key
// (an id row written in the same transaction), or read back what the transaction
// wrote — never by assuming either outcome. A COMMIT that the server refused
// (a deferred constraint, a serialization failure) is a plain error, not this.
// Unlike idempotency.ErrCommitUnknown, coord.Retryable reports false for it: a
// blind retry of writes that are not idempotent could apply them twice.
var ErrCommitUnknown = errors.New("pgfence: commit outcome unknown")
