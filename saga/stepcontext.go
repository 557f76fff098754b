package saga

import (
	"encoding/json"
	"fmt"
)

// StepContext is what a step call knows about its saga: the idempotency key to pass
// to the participant, the saga id and type, the step, the attempt, and the outputs
// of earlier steps. It is valid only during the call it was passed to.
type StepContext struct{ s *stepState }

type stepState struct {
	sagaID, sagaType, step string
	attempt                int
	compensating           bool
	outputs                map[string]json.RawMessage
	output                 []byte
	maxBytes               int
}

// IdempotencyKey returns "<saga id>/<step name>": the key every call of this step
// (and its compensation) carries, so the participant can deduplicate. [Barrier]
// takes it as is.
func (sc StepContext) IdempotencyKey() string {
	if sc.s == nil {
		return ""
	}
	return sc.s.sagaID + "/" + sc.s.step
}

// SagaID returns the saga's id.
func (sc StepContext) SagaID() string {
	if sc.s == nil {
		return ""
	}
	return sc.s.sagaID
}

// SagaType returns the definition's name.
func (sc StepContext) SagaType() string {
	if sc.s == nil {
		return ""
	}
	return sc.s.sagaType
}

// Step returns the step's name.
func (sc StepContext) Step() string {
	if sc.s == nil {
		return ""
	}
	return sc.s.step
}

// Attempt returns the attempt number of this call, from 1. Crashed runs that never
// recorded a failure are not counted.
func (sc StepContext) Attempt() int {
	if sc.s == nil {
		return 0
	}
	return sc.s.attempt
}

// Compensating reports whether this call is a compensation.
func (sc StepContext) Compensating() bool { return sc.s != nil && sc.s.compensating }

// Output decodes the output recorded by the earlier step named step into v. It
// returns an error matching ErrNoOutput when that step recorded none (or has not
// run), and the json error when v does not fit.
func (sc StepContext) Output(step string, v any) error {
	if sc.s == nil {
		return fmt.Errorf("%w: %q (no step context)", ErrNoOutput, step)
	}
	raw, ok := sc.s.outputs[step]
	if !ok {
		return fmt.Errorf("%w: %q", ErrNoOutput, step)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("saga: output of %q: %w", step, err)
	}
	return nil
}

// SetOutput records v (as JSON) as this step's output; it is committed with the
// step and visible to later steps through Output. Only a successful forward action's
// output is kept. It returns an error matching ErrTooLarge or ErrInvalidData when v
// cannot be stored, and nothing is recorded.
func (sc StepContext) SetOutput(v any) error {
	if sc.s == nil {
		return fmt.Errorf("%w: no step context", ErrInvalidData)
	}
	b, err := encodeJSON("output of "+sc.s.step, v, sc.s.maxBytes)
	if err != nil {
		return err
	}
	sc.s.output = b
	return nil
}
