package good

import (
	"context"

	"github.com/coordkit/coordkit/saga"
)

type Order struct{}

func reserve(ctx context.Context, o *Order) error { return nil }
func release(ctx context.Context, o *Order) error { return nil }
func charge(ctx context.Context, o *Order) error  { return nil }
func ship(ctx context.Context, o *Order) error    { return nil }

func definitions(steps []saga.Step[Order]) {
	saga.New("order",
		saga.Compensatable("reserve", reserve, release),
		saga.Compensatable[Order]("hold", reserve, release),
		saga.Pivot("charge", charge),
		saga.Retriable("ship", ship),
		saga.Retriable("notify", ship),
	)
	saga.New("pivot-only", saga.Pivot("charge", charge))
	// Not literal: left to saga.New's own validation.
	saga.New("dynamic", steps...)
	saga.New("helper", step())
}

func step() saga.Step[Order] { return saga.Retriable("x", ship) }
