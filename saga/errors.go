package saga

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/coordkit/coordkit/coord"
)

// Definition errors, returned by [New] inside a *DefinitionError.
var (
	// ErrNoPivot: the definition declares no pivot step.
	ErrNoPivot = errors.New("saga: no pivot step")
	// ErrTwoPivots: the definition declares more than one pivot step.
	ErrTwoPivots = errors.New("saga: more than one pivot step")
	// ErrNoCompensation: a compensatable step has a nil compensation.
	ErrNoCompensation = errors.New("saga: compensatable step without compensation")
	// ErrCompensationAfterPivot: a compensation on or after the pivot.
	ErrCompensationAfterPivot = errors.New("saga: compensation on or after the pivot")
	// ErrInvalidDefinition: any other problem with a definition (no steps, a nil
	// action, a duplicate step name, a retriable step before the pivot).
	ErrInvalidDefinition = errors.New("saga: invalid definition")
)

// Runtime and admin errors.
var (
	// ErrBusiness marks a business failure returned by a step: the step declined
	// and did nothing. Wrap one with [Fail]. Before the pivot the saga compensates;
	// after it, the runtime refuses to compensate and retries forward.
	ErrBusiness = errors.New("saga: business failure")
	// ErrNotFound: no saga with that id.
	ErrNotFound = errors.New("saga: not found")
	// ErrAlreadyStarted: StartOpts.ID names a saga that already exists. Returned
	// as *AlreadyStartedError.
	ErrAlreadyStarted = errors.New("saga: already started")
	// ErrPastPivot: the operation (cancel) would compensate a saga that has reached
	// its pivot. Nothing was changed.
	ErrPastPivot = errors.New("saga: past the pivot")
	// ErrWrongState: the saga is not in a state the operation applies to (for
	// example resolving a saga that does not need a human). Returned as *StateError.
	ErrWrongState = errors.New("saga: wrong state")
	// ErrTooLarge: saga data or a step output exceeds Config.MaxDataBytes.
	ErrTooLarge = errors.New("saga: value too large")
	// ErrInvalidData: saga data or a step output cannot be stored (not JSON-
	// serialisable, or it contains invalid UTF-8, which JSON would silently replace).
	ErrInvalidData = errors.New("saga: invalid data")
	// ErrInvalidConfig: a Config field (returned as *ConfigError) or a per-call
	// option failed validation.
	ErrInvalidConfig = errors.New("saga: invalid config")
	// ErrUnknownType: the saga type is not registered with this client: Start and
	// StartTx refuse it (no runner would drive it), and Run cannot drive it.
	ErrUnknownType = errors.New("saga: unknown saga type")
	// ErrNoOutput: StepContext.Output asked for a step that recorded no output.
	ErrNoOutput = errors.New("saga: no output for step")
	// ErrClaimLost: a runner's write was rejected because another runner claimed
	// the saga since (the claim_version fence). The runner drops the saga.
	ErrClaimLost = errors.New("saga: claim lost")
	// ErrBarrierKey: a barrier was given a key that is not "<saga id>/<step>".
	ErrBarrierKey = errors.New("saga: invalid barrier key")
)

// Fail marks err as a business failure (errors.Is(result, ErrBusiness) is true,
// and the result unwraps to err). A nil err is reported as a plain ErrBusiness.
func Fail(err error) error {
	if err == nil {
		return ErrBusiness
	}
	return &businessError{err: err}
}

// businessError is what Fail returns.
type businessError struct{ err error }

func (e *businessError) Error() string        { return "saga: business failure: " + e.err.Error() }
func (e *businessError) Unwrap() error        { return e.err }
func (e *businessError) Is(target error) bool { return target == ErrBusiness }

// DefinitionError reports why [New] rejected a definition. It unwraps to one of
// the definition errors (or a *coord.NameError).
type DefinitionError struct {
	Saga   string // the definition's name
	Step   string // the offending step, if any
	Err    error  // ErrNoPivot, ErrTwoPivots, ErrNoCompensation, ...
	Detail string // what exactly is wrong
}

// Error describes the definition problem.
func (e *DefinitionError) Error() string {
	s := fmt.Sprintf("saga %q", e.Saga)
	if e.Step != "" {
		s += fmt.Sprintf(" step %q", e.Step)
	}
	return s + ": " + e.Detail + ": " + e.Err.Error()
}

// Unwrap returns the error class.
func (e *DefinitionError) Unwrap() error { return e.Err }

// Is makes every *DefinitionError match ErrInvalidDefinition, including an
// invalid name (whose Err is a *coord.NameError).
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }

// AlreadyStartedError reports a StartOpts.ID that is already in use. It matches
// ErrAlreadyStarted.
type AlreadyStartedError struct {
	ID   string // the saga id
	Type string // the type of the existing saga
}

// Error names the reused id.
func (e *AlreadyStartedError) Error() string {
	return fmt.Sprintf("saga: %q already started (type %q)", e.ID, e.Type)
}

// Is makes errors.Is(err, ErrAlreadyStarted) true.
func (e *AlreadyStartedError) Is(target error) bool { return target == ErrAlreadyStarted }

// StateError reports an admin operation on a saga in the wrong state. It matches
// ErrWrongState.
type StateError struct {
	ID    string
	State State
	Want  string // what the operation needs
}

// Error names the saga, its state and what the operation needs.
func (e *StateError) Error() string {
	return fmt.Sprintf("saga %q is %s; %s", e.ID, e.State, e.Want)
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *StateError) Is(target error) bool { return target == ErrWrongState }

// ConfigError reports an invalid Config or BarrierConfig field. It matches
// ErrInvalidConfig and, for an invalid table or schema name, unwraps to the
// *coord.NameError.
type ConfigError struct {
	Field  string // the field the caller set, e.g. "Table", or the argument ("pool")
	Reason string // what is wrong with it
	Err    error  // the underlying error, e.g. a *coord.NameError; may be nil
}

// Error describes the invalid field.
func (e *ConfigError) Error() string { return "saga: invalid config " + e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// nameError reports an invalid identifier as the ConfigError of its field.
func nameError(ne *coord.NameError) *ConfigError {
	return &ConfigError{Field: ne.Field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
}
