package correctnesslease

import (
	"errors"
	"fmt"

	"github.com/coordkit/coordkit/internal/sentinel"
)

var (
	// ErrHeld is returned (wrapped) by TryAcquire when another key is ahead in the
	// queue: someone else holds the lease or waits for it. Retryable: a later
	// TryAcquire (or Acquire, which waits) can get it.
	ErrHeld = sentinel.Retryable("correctnesslease: lease held by another session")

	// ErrAlreadyQueued is returned (wrapped) by Acquire and TryAcquire when this
	// session already holds, or waits for, the same name. A session holds a name
	// at most once.
	ErrAlreadyQueued = errors.New("correctnesslease: session already holds or waits for this lease")

	// ErrInvalidConfig matches every *ConfigError.
	ErrInvalidConfig = errors.New("correctnesslease: invalid config")

	// ErrDrainExceeded is returned (wrapped) by Run when the work function did not
	// return within RunOpts.Drain after its context was cancelled. Run does not
	// campaign again while the previous term's work may still be running. The
	// error also wraps the *coord.AuthorityLostError that ended the term.
	ErrDrainExceeded = errors.New("correctnesslease: work did not stop within the drain period")

	// ErrNotFound is returned (wrapped) by LeaseGet when nobody holds or waits
	// for the lease: etcd has no key under its prefix.
	ErrNotFound = errors.New("correctnesslease: not found")
)

// ConfigError reports an invalid Config field. It matches ErrInvalidConfig and,
// for an invalid Tenant, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the Config field, e.g. "TTL", or the argument ("client")
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("correctnesslease: invalid config %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }
