package idempotency

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/coordkit/coordkit/coord"

	"github.com/coordkit/coordkit/internal/sentinel"
)

// Sentinel errors. Every error this package returns for one of these conditions
// matches the sentinel with errors.Is.
var (
	// ErrMismatch: the key was used before with a different request (HTTP 422).
	// Returned as *MismatchError. Do not retry: use a new key.
	ErrMismatch = errors.New("idempotency: key reused with a different request")

	// ErrInFlight: a request with the same key is still running (HTTP 409).
	// Returned as *InFlightError. Retry after InFlightError.RetryAfter.
	ErrInFlight = sentinel.Retryable("idempotency: a request with this key is in progress")

	// ErrInvalidKey: the key or scope failed validation (HTTP 400). Returned as *KeyError.
	ErrInvalidKey = errors.New("idempotency: invalid key")

	// ErrResponseTooLarge: the response to store exceeds Config.MaxResponseBytes.
	// The effect's transaction is rolled back.
	ErrResponseTooLarge = errors.New("idempotency: response too large to store")

	// ErrCommitUnknown: the connection failed while COMMIT was in flight, so whether
	// the effect committed is unknown. Retry with the same key: the retry either
	// replays the committed response or runs the effect, never both.
	ErrCommitUnknown = sentinel.Retryable("idempotency: commit outcome unknown, retry with the same key")

	// ErrLockLost: a phased request lost its lock (it expired and a retry or the
	// completer took the key over). Stop; the new owner finishes the request.
	ErrLockLost = errors.New("idempotency: lock on key lost to another owner")

	// ErrInvalidOperation: a phased Operation is malformed, or a stored key names an
	// operation or recovery point the caller did not supply.
	ErrInvalidOperation = errors.New("idempotency: invalid operation")

	// ErrInvalidConfig: a Config field is invalid. Returned as *ConfigError.
	ErrInvalidConfig = errors.New("idempotency: invalid config")
	// ErrNotFound: KeyGet named a key that is not stored (never used, or pruned).
	ErrNotFound = errors.New("idempotency: not found")
)

// MismatchError reports a key reused with a different request fingerprint. It
// matches ErrMismatch.
type MismatchError struct {
	Key Key // the reused key
}

// Error describes the reused key.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("idempotency: key %s was used with a different request", e.Key)
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// InFlightError reports that a request with the same key is in progress. It matches
// ErrInFlight. RetryAfter is a hint (at least one second) for when to retry.
type InFlightError struct {
	Key        Key
	RetryAfter time.Duration
	// Age is how long the other request has been in progress, when known (a
	// committed phased request); 0 when the other request's transaction is still
	// uncommitted (the lock wait timed out).
	Age time.Duration
}

// Error describes the key in progress and the retry hint.
func (e *InFlightError) Error() string {
	return fmt.Sprintf("idempotency: key %s is in progress, retry after %s", e.Key, e.RetryAfter)
}

// Is makes errors.Is(err, ErrInFlight) true.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// Retryable is true: retry with the same key after RetryAfter.
func (e *InFlightError) Retryable() bool { return true }

// KeyError reports an invalid key or scope. It matches ErrInvalidKey.
type KeyError struct {
	Field  string // "scope" or "key"
	Value  string // the offending value, made valid UTF-8 and cut to 64 bytes (pgtext.Clean)
	Reason string
}

// Error describes what is wrong with the key or scope.
func (e *KeyError) Error() string {
	return fmt.Sprintf("idempotency: invalid %s %q: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidKey) true.
func (e *KeyError) Is(target error) bool { return target == ErrInvalidKey }

// ConfigError reports an invalid Config field. It matches ErrInvalidConfig and,
// for an invalid table or schema name, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the Config field the caller set, e.g. "Table"
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return "idempotency: invalid config " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// nameError reports an invalid identifier as the ConfigError of its field.
func nameError(ne *coord.NameError) *ConfigError {
	return &ConfigError{Field: ne.Field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
}
