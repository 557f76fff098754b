package outbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/sentinel"
)

// Errors returned by the package. Every validation failure is an *EventError that
// matches ErrInvalidEvent and, with errors.Is, the specific sentinel below.
var (
	// ErrInvalidEvent: an event failed write-time validation; nothing was written.
	ErrInvalidEvent = errors.New("outbox: invalid event")
	// ErrEmptyField: Topic, Key or Type is empty.
	ErrEmptyField = errors.New("outbox: empty field")
	// ErrFieldTooLong: Topic, Key, Type or a header is longer than allowed.
	ErrFieldTooLong = errors.New("outbox: field too long")
	// ErrInvalidUTF8: the payload, a field or a header is not valid UTF-8 or contains NUL.
	ErrInvalidUTF8 = errors.New("outbox: invalid UTF-8")
	// ErrInvalidJSON: a payload declared JSON is not JSON that PostgreSQL's jsonb accepts.
	ErrInvalidJSON = errors.New("outbox: invalid JSON")
	// ErrPayloadTooLarge: the payload exceeds Config.MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("outbox: payload too large")
	// ErrInvalidID: an event id is not a canonical UUID.
	ErrInvalidID = errors.New("outbox: invalid event id")

	// ErrInvalidConfig: a Config or table name failed validation.
	ErrInvalidConfig = errors.New("outbox: invalid config")
	// ErrNotFound: ParkedGet, ParkedRequeue, ParkedDiscard or ParkedLockTx named
	// an event that is not in the dead-letter table.
	ErrNotFound = errors.New("outbox: not found")
	// ErrNotParked is ErrNotFound.
	//
	// Deprecated: use ErrNotFound (the same error).
	ErrNotParked = ErrNotFound
	// ErrNoDestination: the broker has no stream or topic for what a publisher
	// publishes (reported by a Checker at relay start, and by publishers per
	// message, with the name).
	ErrNoDestination = errors.New("outbox: broker destination does not exist")
	// ErrSkipped is what a Publisher reports for a message it did not attempt because
	// an earlier message of the same key failed in the same batch, or because ctx
	// was done before its turn. The relay does not count it as an attempt.
	ErrSkipped = sentinel.Retryable("outbox: skipped after an earlier failure of the same key")
)

// EventError reports why an event was rejected at enqueue. It matches
// ErrInvalidEvent and unwraps to the specific sentinel (ErrInvalidUTF8, ...).
type EventError struct {
	Index  int    // position in a batch; 0 for a single event
	Field  string // "topic", "key", "type", "payload", "headers", "id"
	Err    error  // the specific sentinel
	Reason string // human detail
}

// Error describes the rejected field and why.
func (e *EventError) Error() string {
	return fmt.Sprintf("outbox: invalid event #%d: %s: %s: %s", e.Index, e.Field, strings.TrimPrefix(fmt.Sprint(e.Err), "outbox: "), e.Reason)
}

// Is makes errors.Is(err, ErrInvalidEvent) true.
func (e *EventError) Is(target error) bool { return target == ErrInvalidEvent }

// Unwrap returns the specific sentinel.
func (e *EventError) Unwrap() error { return e.Err }

// ConfigError reports an invalid Config, InboxConfig or ConsumerConfig field (or
// argument). It matches ErrInvalidConfig and, for an invalid table, schema or
// channel name, unwraps to the *coord.NameError.
type ConfigError struct {
	Field  string // the field the caller set, e.g. "Table"
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field and why.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("outbox: invalid config %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// nameError reports an invalid identifier as the ConfigError of its field.
func nameError(ne *coord.NameError) *ConfigError {
	return &ConfigError{Field: ne.Field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
}

// quoted bounds an offending value quoted in an error message: storable, cut on a
// rune boundary.
const quoted = 64
