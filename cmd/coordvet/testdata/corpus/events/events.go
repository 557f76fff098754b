// Package events is the team's own event bus: an interface the services use,
// and its NATS implementation in the same package.
package events

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"
)

// Bus publishes domain events.
type Bus interface {
	Emit(ctx context.Context, subject string, payload []byte) error
}

type natsBus struct{ nc *nats.Conn }

// NewNATS returns a Bus over a NATS connection.
func NewNATS(nc *nats.Conn) Bus { return &natsBus{nc: nc} }

func (b *natsBus) Emit(ctx context.Context, subject string, payload []byte) error {
	return b.nc.Publish(subject, payload)
}

// Announce encodes and emits an event: a publishing helper other packages call.
func Announce(ctx context.Context, b Bus, subject string, v any) error {
	payload, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Emit(ctx, subject, payload)
}

// Sender has nats.Conn's Publish shape, so a *nats.Conn satisfies it.
type Sender interface {
	Publish(subject string, data []byte) error
}
