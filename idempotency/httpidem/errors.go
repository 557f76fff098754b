package httpidem

import "errors"

// ErrInvalidConfig: a Config field (or a required argument) is invalid. Returned
// as *ConfigError.
var ErrInvalidConfig = errors.New("httpidem: invalid config")

// ConfigError reports an invalid Config field. It matches ErrInvalidConfig.
type ConfigError struct {
	Field  string // the Config field, e.g. "Scope", or the argument ("store")
	Reason string // what is wrong with it
	Err    error  // the underlying error; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string { return "httpidem: invalid config " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }
