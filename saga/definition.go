package saga

import (
	"fmt"

	"github.com/coordkit/coordkit/coord"
)

// MaxSteps bounds the number of steps of one definition.
const MaxSteps = 100

// Definition is a validated saga: its name (the saga type stored with every
// instance) and its steps. Build it with [New]; register it with [Client.Register]
// so runners can drive it; start instances with [Start] or [StartTx].
// A Definition is immutable and safe for concurrent use.
type Definition[T any] struct {
	name  string
	steps []Step[T]
	pivot int
	shape string // what a runner needs to match: the name, and each step's kind and name
}

// Name returns the saga type.
func (d *Definition[T]) Name() string { return d.name }

// PivotIndex returns the index of the pivot step.
func (d *Definition[T]) PivotIndex() int { return d.pivot }

// Steps returns a copy of the steps.
func (d *Definition[T]) Steps() []Step[T] { return append([]Step[T](nil), d.steps...) }

// stepNames returns the steps' names in order, as Start records them.
func (d *Definition[T]) stepNames() []string {
	names := make([]string, len(d.steps))
	for i, s := range d.steps {
		names[i] = s.name
	}
	return names
}

// New validates and returns a saga definition. It does not block. Errors are
// *DefinitionError matching one of ErrNoPivot, ErrTwoPivots, ErrNoCompensation,
// ErrCompensationAfterPivot, ErrInvalidDefinition (a bad or duplicate name, a nil
// action, no steps, more than MaxSteps) — and coord.ErrInvalidName for names.
//
// Names follow coord.ValidateName: non-empty, printable UTF-8, no '/', no
// whitespace, at most 200 bytes — the step name is part of the idempotency key
// "<saga id>/<step name>".
func New[T any](name string, steps ...Step[T]) (*Definition[T], error) {
	bad := func(step string, err error, format string, args ...any) error {
		return &DefinitionError{Saga: name, Step: step, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
	if err := coord.ValidateName("saga name", name, coord.MaxNameLen); err != nil {
		return nil, bad("", err, "invalid saga name")
	}
	if len(steps) == 0 {
		return nil, bad("", ErrInvalidDefinition, "no steps")
	}
	if len(steps) > MaxSteps {
		return nil, bad("", ErrInvalidDefinition, "%d steps, at most %d", len(steps), MaxSteps)
	}
	hasPivot := false
	for _, s := range steps {
		hasPivot = hasPivot || s.kind == KindPivot
	}
	seen := map[string]bool{}
	pivot := -1
	for i, s := range steps {
		if err := coord.ValidateName("step name", s.name, coord.MaxNameLen); err != nil {
			return nil, bad(s.name, err, "step %d: invalid name", i)
		}
		if seen[s.name] {
			return nil, bad(s.name, ErrInvalidDefinition, "step %d: duplicate name", i)
		}
		seen[s.name] = true
		if s.action == nil {
			return nil, bad(s.name, ErrInvalidDefinition, "step %d: nil action", i)
		}
		switch s.kind {
		case KindCompensatable:
			if s.compensate == nil {
				return nil, bad(s.name, ErrNoCompensation, "step %d is compensatable but its compensation is nil", i)
			}
			if pivot >= 0 {
				return nil, bad(s.name, ErrCompensationAfterPivot, "step %d is compensatable but comes after the pivot %q", i, steps[pivot].name)
			}
		case KindPivot:
			if pivot >= 0 {
				return nil, bad(s.name, ErrTwoPivots, "steps %q and %q are both pivots", steps[pivot].name, s.name)
			}
			if s.compensate != nil {
				return nil, bad(s.name, ErrCompensationAfterPivot, "the pivot has a compensation")
			}
			pivot = i
		case KindRetriable:
			if !hasPivot {
				return nil, bad("", ErrNoPivot, "exactly one step must be declared with Pivot (retriable steps come after it)")
			}
			if pivot < 0 {
				return nil, bad(s.name, ErrInvalidDefinition, "retriable step %d comes before the pivot: retriable steps are only retried forward, so they belong after it", i)
			}
		default:
			return nil, bad(s.name, ErrInvalidDefinition, "step %d: not built with Compensatable, Pivot or Retriable", i)
		}
	}
	if pivot < 0 {
		return nil, bad("", ErrNoPivot, "exactly one step must be declared with Pivot")
	}
	shape := name
	for _, s := range steps {
		shape += "\x00" + string(s.kind) + " " + s.name // names hold no NUL (coord.ValidateName)
	}
	return &Definition[T]{name: name, steps: append([]Step[T](nil), steps...), pivot: pivot, shape: shape}, nil
}
