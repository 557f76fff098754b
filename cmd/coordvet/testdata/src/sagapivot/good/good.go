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

func fromLocalSlices(extra saga.Step[Order], cond bool) {
	steps := []saga.Step[Order]{
		saga.Compensatable("reserve", reserve, release),
		saga.Pivot("charge", charge),
		saga.Retriable("ship", ship),
	}
	saga.New("order", steps...)

	// Changed after its literal: not known, left to saga.New's own validation.
	grown := []saga.Step[Order]{saga.Compensatable("reserve", reserve, release)}
	grown = append(grown, extra)
	saga.New("grown", grown...)

	replaced := []saga.Step[Order]{saga.Compensatable("reserve", reserve, release)}
	replaced[0] = extra
	saga.New("replaced", replaced...)

	var chosen []saga.Step[Order]
	if cond {
		chosen = []saga.Step[Order]{saga.Retriable("ship", ship)}
	} else {
		chosen = []saga.Step[Order]{saga.Pivot("charge", charge)}
	}
	saga.New("chosen", chosen...)

	shared := []saga.Step[Order]{saga.Retriable("ship", ship)}
	fill(&shared)
	saga.New("shared", shared...)
}

func fill(s *[]saga.Step[Order]) { *s = append(*s, saga.Pivot("charge", charge)) }
