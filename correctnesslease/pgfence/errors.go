package pgfence

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coordkit/coordkit/coord"
)

// ErrZeroToken is returned when a write presents the zero coord.Token. It also
// matches coord.ErrInvalidToken. Nothing is written.
var ErrZeroToken = fmt.Errorf("pgfence: zero fencing token: %w", coord.ErrInvalidToken)

// ErrInvalidConfig matches every *ConfigError: an invalid Config or RowSpec field.
var ErrInvalidConfig = errors.New("pgfence: invalid config")

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

// ConfigError reports an invalid Config or RowSpec field. It matches
// ErrInvalidConfig and, for an invalid name, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the field the caller set, e.g. "Table" or "RowSpec.Key"
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
