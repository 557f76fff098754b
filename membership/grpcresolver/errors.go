package grpcresolver

import (
	"errors"
	"fmt"
)

// ErrInvalidConfig matches every *ConfigError.
var ErrInvalidConfig = errors.New("grpcresolver: invalid config")

// ConfigError reports an invalid Config field, argument or target. It matches
// ErrInvalidConfig and unwraps to the underlying error (for a target naming an
// invalid tenant or service, membership's *ConfigError and the
// *coord.NameError under it).
type ConfigError struct {
	Field  string // the Config field, or "client" or "target"
	Reason string // what is wrong with it
	Err    error  // the underlying error; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("grpcresolver: invalid config %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }
