package failstatic

import (
	"errors"
	"fmt"
	"time"

	"github.com/coordkit/coordkit/internal/sentinel"
)

var (
	// ErrStale: the keys asked for belong to a class whose maximum staleness has
	// passed; the class fails closed until the cache is confirmed current again.
	// Returned as *StaleError.
	ErrStale = sentinel.Retryable("failstatic: snapshot too stale for key class")

	// ErrNoSnapshot: New could not obtain any valid snapshot — etcd did not answer
	// (or answered with a snapshot that failed validation) within the initial
	// timeout and there was no usable state file.
	ErrNoSnapshot = sentinel.Retryable("failstatic: no valid snapshot")

	// ErrCorruptState: the state file exists but cannot be used (bad magic,
	// unknown version, checksum mismatch, truncated, written for another
	// key/prefix, a snapshot no etcd could have served — revision below 1, keys
	// outside the watched key or prefix — or rejected by Decode or Validate). It is
	// ignored. Returned as *StateFileError.
	ErrCorruptState = errors.New("failstatic: state file unusable")

	// ErrRejected: a snapshot failed Decode or Validate and was not adopted.
	// Returned as *RejectedError (to the logger and Status, never from Get).
	ErrRejected = errors.New("failstatic: snapshot rejected")

	// ErrNotFound: Lookup found no such key in the current snapshot.
	ErrNotFound = errors.New("failstatic: key not found")

	// ErrInvalidConfig: Config failed validation in New. Returned as *ConfigError.
	ErrInvalidConfig = errors.New("failstatic: invalid config")
)

// StaleError reports a key class that failed closed. It matches ErrStale.
type StaleError struct {
	Class     string        // the KeyClass name
	Staleness time.Duration // the cache's staleness when the read was refused
	Max       time.Duration // the class's MaxStaleness
}

// Error describes the failure.
func (e *StaleError) Error() string {
	return fmt.Sprintf("failstatic: key class %q is %v stale, max %v: failing closed", e.Class, e.Staleness.Round(time.Millisecond), e.Max)
}

// Is makes errors.Is(err, ErrStale) true.
func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Retryable is true: the class serves again once the cache is confirmed current.
func (e *StaleError) Retryable() bool { return true }

// StateFileError reports an unusable state file. It matches ErrCorruptState and
// unwraps to the underlying I/O or decode error, if any.
type StateFileError struct {
	Path   string
	Reason string // "magic", "version", "checksum", "truncated", "payload", "identity", "invalid", "rejected"
	Err    error
}

// Error describes the failure.
func (e *StateFileError) Error() string {
	s := fmt.Sprintf("failstatic: state file %s unusable: %s", e.Path, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes errors.Is(err, ErrCorruptState) true.
func (e *StateFileError) Is(target error) bool { return target == ErrCorruptState }

// Unwrap returns the underlying cause.
func (e *StateFileError) Unwrap() error { return e.Err }

// RejectedError reports a snapshot that failed Decode or Validate. It matches
// ErrRejected and unwraps to the error Decode or Validate returned.
type RejectedError struct {
	Revision int64  // revision of the rejected snapshot
	Stage    string // "decode" or "validate"
	Err      error
}

// Error describes the failure.
func (e *RejectedError) Error() string {
	return fmt.Sprintf("failstatic: snapshot at revision %d rejected by %s: %v", e.Revision, e.Stage, e.Err)
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// Unwrap returns the error from Decode or Validate.
func (e *RejectedError) Unwrap() error { return e.Err }

// ConfigError reports an invalid Config field. It matches ErrInvalidConfig.
type ConfigError struct {
	Field  string // the Config field, e.g. "Prefix", or the argument ("client")
	Reason string // what is wrong with it
	Err    error  // the underlying error; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return "failstatic: invalid config " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }
