// Package sagas defines the order saga.
package sagas

import (
	"context"

	"github.com/coordkit/coordkit/saga"
)

// Order is the saga's data.
type Order struct{ ID string }

func step(ctx context.Context, sc saga.StepContext, o *Order) error { return nil }

// NoPivot forgot the point of no return.
func NoPivot() (*saga.Definition[Order], error) {
	return saga.New("order-v1", // corpus: sagapivot
		saga.Compensatable("reserve", step, step),
		saga.Retriable("ship", step),
	)
}

// TwoPivots has two points of no return.
func TwoPivots() (*saga.Definition[Order], error) {
	return saga.New("order-v2",
		saga.Compensatable("reserve", step, step),
		saga.Pivot("charge", step),
		saga.Pivot("ship", step), // corpus: sagapivot
	)
}

// FromSlice gathers the steps in a slice first, and forgets the pivot.
func FromSlice() (*saga.Definition[Order], error) {
	steps := []saga.Step[Order]{
		saga.Compensatable("reserve", step, step),
		saga.Retriable("ship", step),
	}
	return saga.New("order-v4", steps...) // corpus: sagapivot
}

//corpus:negative
func FromSliceWithPivot() (*saga.Definition[Order], error) {
	steps := []saga.Step[Order]{
		saga.Compensatable("reserve", step, step),
		saga.Pivot("charge", step),
		saga.Retriable("ship", step),
	}
	return saga.New("order-v5", steps...)
}

//corpus:negative
func OnePivot() (*saga.Definition[Order], error) {
	return saga.New("order-v3",
		saga.Compensatable("reserve", step, step),
		saga.Pivot("charge", step),
		saga.Retriable("ship", step),
	)
}
