package saga

import "context"

// Action is one call a saga makes: a step's forward action or its compensation.
// It receives the step's context (cancelled when the runner stops or its claim on
// the saga is about to expire), the [StepContext] (idempotency key, attempt,
// outputs of earlier steps) and the saga's data, which it may modify: changes are
// committed with the step's result, and discarded when the action returns an error.
//
// Return nil for success, an error wrapped by [Fail] for a business failure (the
// step declined and did nothing; before the pivot the saga compensates), and any
// other error for a technical failure (retried with backoff).
type Action[T any] func(ctx context.Context, sc StepContext, data *T) error

// Kind is the kind of a step.
type Kind string

// The three kinds of steps. A definition lists compensatable steps, then exactly
// one pivot, then retriable steps.
const (
	// KindCompensatable: an action with a compensation that semantically undoes it.
	KindCompensatable Kind = "compensatable"
	// KindPivot: the point of no return. Once it commits, the saga only moves forward.
	KindPivot Kind = "pivot"
	// KindRetriable: a step after the pivot, retried until it succeeds.
	KindRetriable Kind = "retriable"
)

// Step is one step of a saga definition, built by [Compensatable], [Pivot] or
// [Retriable]. Its fields are unexported: a step is validated by [New].
type Step[T any] struct {
	name       string
	kind       Kind
	action     Action[T]
	compensate Action[T]
}

// Name returns the step's name, which is also the second half of its idempotency key.
func (s Step[T]) Name() string { return s.name }

// Kind returns the step's kind.
func (s Step[T]) Kind() Kind { return s.kind }

// Compensatable returns a step that runs before the pivot: action does the work and
// compensate undoes it (a refund for a charge, a release for a reservation). Both
// must be idempotent under the key StepContext.IdempotencyKey; [Barrier] makes
// that easy. A nil compensate is rejected by [New] with ErrNoCompensation.
func Compensatable[T any](name string, action Action[T], compensate Action[T]) Step[T] {
	return Step[T]{name: name, kind: KindCompensatable, action: action, compensate: compensate}
}

// Pivot returns the saga's point of no return (the step that cannot be undone, or
// whose success makes the whole saga succeed). A business failure of the pivot
// itself still compensates the steps before it; once the pivot commits, the
// runtime never compensates.
func Pivot[T any](name string, action Action[T]) Step[T] {
	return Step[T]{name: name, kind: KindPivot, action: action}
}

// Retriable returns a step after the pivot. It is retried forward until it
// succeeds: a business failure is treated like a technical one, logged and
// retried, and the saga's age shows in coordkit.saga.state.age.
func Retriable[T any](name string, action Action[T]) Step[T] {
	return Step[T]{name: name, kind: KindRetriable, action: action}
}
