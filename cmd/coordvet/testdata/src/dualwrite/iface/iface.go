package iface

import (
	"context"
	"database/sql"

	"github.com/coordkit/coordkit/outbox"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EventBus is the team's own abstraction; natsBus, its dynamic type in this
// package, publishes.
type EventBus interface {
	Emit(ctx context.Context, topic string, payload []byte) error
}

type natsBus struct{ nc *nats.Conn }

func (b natsBus) Emit(ctx context.Context, topic string, payload []byte) error {
	return b.nc.Publish(topic, payload)
}

func NewBus(nc *nats.Conn) EventBus { return natsBus{nc} }

func ThroughEventBus(ctx context.Context, tx *sql.Tx, bus EventBus) error {
	if err := tx.Commit(); err != nil {
		return err
	}
	return bus.Emit(ctx, "orders", nil) // want `ThroughEventBus commits \(sql.Tx.Commit, line 27\) and publishes \(iface.EventBus.Emit → natsBus.Emit → nats.Conn.Publish\)`
}

// Producer mirrors kgo's client so tests can fake it: its method matches
// a known broker client's.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

func ThroughMirror(ctx context.Context, tx *sql.Tx, p Producer) error {
	_ = tx.Commit()
	return p.ProduceSync(ctx, &kgo.Record{Topic: "orders"}).FirstErr() // want `publishes \(iface.Producer.ProduceSync \(like kgo Client.ProduceSync\)\)`
}

// Sender has nats.Conn.Publish's shape.
type Sender interface {
	Publish(subject string, data []byte) error
}

func ThroughShape(tx *sql.Tx, s Sender) error {
	_ = tx.Commit()
	return s.Publish("orders", nil) // want `publishes \(iface.Sender.Publish \(like nats.go Conn.Publish\)\)`
}

// The SDK's outbox.Publisher outside a relay is a direct publish.
func ThroughOutboxPublisher(ctx context.Context, tx *sql.Tx, p outbox.Publisher) error {
	_ = tx.Commit()
	p.Publish(ctx, []outbox.Message{{Topic: "orders"}}) // want `publishes \(outbox.Publisher.Publish\)`
	return nil
}

// Cache is an interface whose dynamic types here do not publish.
type Cache interface {
	Emit(ctx context.Context, topic string, payload []byte) error
}

type memCache struct{}

func (memCache) Forget(key string) {}

func ThroughOther(ctx context.Context, tx *sql.Tx, c interface{ Forget(string) }) error {
	_ = tx.Commit()
	c.Forget("orders")
	return nil
}
