package membership

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coordkit/coordkit/coord"
)

var (
	// ErrInvalidConfig matches every *ConfigError.
	ErrInvalidConfig = errors.New("membership: invalid config")

	// ErrNotRegistered is returned (wrapped) by Update when the instance's key is
	// not in etcd at that moment (lost and being re-registered). The new metadata
	// is kept: the re-registration writes it, so there is nothing to retry.
	ErrNotRegistered = errors.New("membership: not registered")

	// ErrClosed is returned (wrapped) by calls on a Registration after Deregister,
	// on a Session after Close, and on a Watcher after it stopped.
	ErrClosed = errors.New("membership: closed")

	// ErrNotFound is returned (wrapped) by ServiceGet when etcd holds no key
	// under the service's prefix: nobody is registered.
	ErrNotFound = errors.New("membership: not found")
)

// ConfigError reports an invalid configuration field or argument. It matches
// ErrInvalidConfig and, for an invalid name, unwraps to the *coord.NameError
// (so errors.Is(err, coord.ErrInvalidName) holds too).
type ConfigError struct {
	Field  string // the Config field the caller set, e.g. "TTL" or "Metadata", or the argument ("tenant", "client")
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("membership: invalid config %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// nameError validates one name segment as coord does and reports a failure as
// a *ConfigError for field.
func nameError(field, value string, max int) error {
	if err := coord.ValidateName(field, value, max); err != nil {
		ne := err.(*coord.NameError) // ValidateName returns nothing else
		return &ConfigError{Field: field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
	}
	return nil
}
