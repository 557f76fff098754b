package bad

import (
	"context"

	"github.com/coordkit/coordkit/saga"
)

type Order struct{}

func reserve(ctx context.Context, o *Order) error { return nil }
func release(ctx context.Context, o *Order) error { return nil }
func charge(ctx context.Context, o *Order) error  { return nil }
func ship(ctx context.Context, o *Order) error    { return nil }

func definitions() {
	saga.New("no-pivot", // want `sagapivot: saga definition without a pivot; fix: declare the point of no return with saga.Pivot.* \(RFC MUST 5\)`
		saga.Compensatable("reserve", reserve, release),
		saga.Retriable[Order]("ship", ship),
	)
	saga.New("two-pivots",
		saga.Compensatable("reserve", reserve, release),
		saga.Pivot("charge", charge),
		saga.Pivot("ship", ship), // want `a second pivot in one saga definition`
	)
	saga.New[Order]("nil-compensation",
		saga.Compensatable[Order]("reserve", reserve, nil), // want `a Compensatable step with a nil compensation cannot be undone`
		saga.Pivot("charge", charge),
	)
	saga.New("retriable-first",
		saga.Retriable("reserve", reserve), // want `a Retriable step before the pivot`
		saga.Pivot("charge", charge),
	)
	saga.New("compensatable-after",
		saga.Pivot("charge", charge),
		saga.Compensatable("reserve", reserve, release), // want `a Compensatable step after the pivot is never compensated`
	)
	saga.New("suppressed",
		saga.Pivot("charge", charge),
		//coordvet:ignore sagapivot owner=platform expires=2026-09-30 ship is a no-op in the sandbox tenant
		saga.Pivot("ship", ship),
	)
}

// Steps gathered in a local slice first (seen in an outside corpus: missed).
func fromLocalSlice() {
	steps := []saga.Step[Order]{
		saga.Compensatable("reserve", reserve, release),
		saga.Retriable[Order]("ship", ship),
	}
	saga.New("order", steps...) // want `saga definition without a pivot`

	var late = []saga.Step[Order]{
		saga.Pivot("charge", charge),
		saga.Compensatable("reserve", reserve, release), // want `a Compensatable step after the pivot is never compensated`
	}
	saga.New("late", late...)

	saga.New("inline", []saga.Step[Order]{ // want `saga definition without a pivot`
		saga.Retriable[Order]("ship", ship),
	}...)
}
