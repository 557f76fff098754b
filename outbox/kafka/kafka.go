// Package kafka publishes outbox events to Kafka with franz-go.
//
// The record key is the aggregate id (so one key maps to one partition and stays
// ordered), the value is the payload, and the headers carry the event id
// (outbox.HeaderEventID), the event type (outbox.HeaderEventType) and the event's
// own headers (trace context included). Use an idempotent producer (franz-go's
// default): it never fails one record of a partition while producing a later one,
// which is the per-key order contract of outbox.Publisher.
package kafka

import (
	"context"

	"github.com/coordkit/coordkit/outbox"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configures a Publisher; nil means all defaults.
type Options struct {
	// Topic maps an event to a Kafka topic. Default: the event's Topic
	// (aggregatetype).
	Topic func(m outbox.Message) string
}

// Publisher is an outbox.Publisher over a *kgo.Client. Safe for concurrent use.
type Publisher struct {
	client *kgo.Client
	topic  func(m outbox.Message) string
}

// New returns a Publisher producing through client, which the caller configures
// (seed brokers, acks; keep idempotent writes enabled) and closes.
func New(client *kgo.Client, opts *Options) *Publisher {
	p := &Publisher{client: client, topic: func(m outbox.Message) string { return m.Topic }}
	if opts != nil && opts.Topic != nil {
		p.topic = opts.Topic
	}
	return p
}

// Record builds the Kafka record for m.
func (p *Publisher) Record(m outbox.Message) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(m.Headers)+2)
	hs = append(hs, kgo.RecordHeader{Key: outbox.HeaderEventID, Value: []byte(m.ID.String())},
		kgo.RecordHeader{Key: outbox.HeaderEventType, Value: []byte(m.Type)})
	for k, v := range m.Headers {
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return &kgo.Record{Topic: p.topic(m), Key: []byte(m.Key), Value: m.Payload, Headers: hs}
}

// Publish produces msgs and waits for every acknowledgement (or ctx). It returns
// nil when all were acknowledged, else one error per message. It blocks until the
// brokers answered or ctx is done.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		recs[i] = p.Record(m)
	}
	res := p.client.ProduceSync(ctx, recs...)
	if res.FirstErr() == nil {
		return nil
	}
	errs := make([]error, len(msgs))
	for i, r := range res {
		errs[i] = r.Err
	}
	return errs
}
