package publishtest

import "errors"

// ErrInvalidConfig matches every *ConfigError.
var ErrInvalidConfig = errors.New("publishtest: invalid config")

// ConfigError reports an invalid Config field; Run fails the test with it. It
// matches ErrInvalidConfig.
type ConfigError struct {
	Field  string // the Config field, e.g. "Topic"
	Reason string // what is wrong with it
	Err    error  // the underlying error; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string {
	return "publishtest: invalid config " + e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }
