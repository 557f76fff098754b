package saga

import (
	"context"
	"encoding/json"
	"fmt"
)

// AnyDefinition is a *Definition[T] of any T, as [Client.Register] takes it.
type AnyDefinition interface {
	Name() string
	PivotIndex() int
	erase() *erasedDef
}

// erasedDef is a definition with its data type hidden behind JSON.
type erasedDef struct {
	name  string
	pivot int
	steps []erasedStep
	src   AnyDefinition // the registered *Definition
	shape string        // its Definition.shape
}

type erasedStep struct {
	name       string
	kind       Kind
	action     call
	compensate call
}

// call runs an action on the JSON of the saga data and returns the new JSON.
type call func(ctx context.Context, sc StepContext, data []byte) ([]byte, error)

func (d *Definition[T]) erase() *erasedDef {
	e := &erasedDef{name: d.name, pivot: d.pivot, src: d, shape: d.shape}
	for _, s := range d.steps {
		es := erasedStep{name: s.name, kind: s.kind, action: wrap(s.action)}
		if s.compensate != nil {
			es.compensate = wrap(s.compensate)
		}
		e.steps = append(e.steps, es)
	}
	return e
}

func wrap[T any](a Action[T]) call {
	return func(ctx context.Context, sc StepContext, raw []byte) ([]byte, error) {
		var data T
		if err := json.Unmarshal(raw, &data); err != nil {
			return nil, fmt.Errorf("%w: decode saga data: %w", ErrInvalidData, err)
		}
		if err := a(ctx, sc, &data); err != nil {
			return nil, err
		}
		return encodeJSON("saga data", data, sc.s.maxBytes)
	}
}
