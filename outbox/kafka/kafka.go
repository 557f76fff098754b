// Package kafka publishes outbox events to Kafka with franz-go.
//
// The record key is the aggregate id (so one key maps to one partition and stays
// ordered), the value is the payload, and the headers carry the event id
// (outbox.HeaderEventID), the event type (outbox.HeaderEventType) and the event's
// own headers (trace context included). Use an idempotent producer (franz-go's
// default) and a key-hashing partitioner (the default): a failure that the
// brokers or a timeout cause fails every buffered record of the partition, so a
// later record of a key is not written after an earlier one failed. Failures that
// franz-go decides per record before sending (a record too large for a batch, a
// key whose events go to different topics) are handled by Publish itself: such a
// record is produced only after the key's earlier records were acknowledged, and
// the key's later records only after it — the per-key order contract of
// outbox.Publisher.
package kafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/coordkit/coordkit/outbox"
)

// Config configures a Publisher. The zero value is valid.
type Config struct {
	// Topic maps an event to a Kafka topic. Default: the event's Topic
	// (aggregatetype).
	Topic func(m outbox.Message) string
	// Topics lists topics the relay will publish to (after Topic); Check
	// verifies, when the relay starts, that each exists. Default none.
	Topics []string
}

func (c Config) withDefaults() Config {
	if c.Topic == nil {
		c.Topic = func(m outbox.Message) string { return m.Topic }
	}
	return c
}

// Publisher is an outbox.Publisher over a *kgo.Client. Safe for concurrent use.
type Publisher struct {
	client *kgo.Client
	topic  func(m outbox.Message) string
	topics []string
	keyed  *outbox.KeyedPublisher // waves of per-key runs (admit, produce)
}

// New returns a Publisher producing through client, which the caller configures
// (seed brokers, acks; keep idempotent writes enabled) and closes. A nil client
// is an *outbox.ConfigError. No I/O.
func New(client *kgo.Client, cfg Config) (*Publisher, error) {
	if client == nil {
		return nil, &outbox.ConfigError{Field: "client", Reason: "nil *kgo.Client"}
	}
	cfg = cfg.withDefaults() // every Config is valid
	p := &Publisher{client: client, topic: cfg.Topic, topics: cfg.Topics}
	keyed, err := outbox.NewKeyedPublisher(outbox.KeyedConfig{SendBatch: p.produce, Admit: p.admit})
	if err != nil {
		return nil, err
	}
	p.keyed = keyed
	return p, nil
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
// nil when all were acknowledged, else one error per message (outbox.ErrSkipped
// for the messages of a key after its first failure, and for messages not
// produced because ctx was done: they are not attempts). It blocks until the
// brokers answered or ctx is done.
//
// Records are produced in waves: a wave holds, per key, the records up to and
// including the first one franz-go might fail on its own (near or above the
// producer's batch size limit, or on another topic than the key's previous
// record); the key's later records wait for the next wave, which starts once
// the wave was acknowledged and skips the keys that failed. A batch without such
// records is one wave (one ProduceSync); a record that cannot fit in a batch at
// all fails before anything is produced for its key's later records.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.keyed.Publish(ctx, msgs)
}

// admit is the wave rule above: a record on another topic than its key's
// previous one waits for the next wave, one franz-go might fail on its own ends
// its key's run, one that can never fit fails at once.
func (p *Publisher) admit(m outbox.Message, prev *outbox.Message) (outbox.Admission, error) {
	r := p.Record(m)
	if prev != nil && p.topic(*prev) != r.Topic {
		return outbox.AdmitNext, nil // a topic-level failure of the previous record must stop this one
	}
	switch p.fit(r) {
	case fitNever:
		return 0, fmt.Errorf("%w: record of %d bytes does not fit in a produce batch", kerr.MessageTooLarge, userSize(r))
	case fitMaybe:
		return outbox.AdmitLast, nil
	}
	return outbox.AdmitJoin, nil
}

// produce sends one wave and waits for every acknowledgement (or ctx).
func (p *Publisher) produce(ctx context.Context, msgs []outbox.Message) []error {
	batch := make([]*kgo.Record, len(msgs))
	index := make(map[*kgo.Record]int, len(msgs))
	for i, m := range msgs {
		batch[i] = p.Record(m)
		index[batch[i]] = i
	}
	var errs []error
	// ProduceSync lists results in completion order, not in the order of
	// batch: match them by record.
	for _, r := range p.client.ProduceSync(ctx, batch...) {
		if r.Err != nil {
			if errs == nil {
				errs = make([]error, len(msgs))
			}
			errs[index[r.Record]] = fmt.Errorf("kafka: topic %q: %w", r.Record.Topic, r.Err)
		}
	}
	return errs
}

// Check reports whether each of Options.Topics exists: an error matching
// outbox.ErrNoDestination names the first missing topic. The relay calls it at
// start (outbox.Checker). It blocks for one metadata request.
func (p *Publisher) Check(ctx context.Context) error {
	return checkTopics(ctx, p.client, p.topics)
}

type fitness int

const (
	fitSure  fitness = iota // fits in a batch whatever the encoding overhead
	fitMaybe                // within the encoding overhead of the limit
	fitNever                // larger than the limit without any overhead
)

// fit classifies r against the client's batch and buffer limits. The bounds
// bracket franz-go's own wire-size computation: a record batch header (61
// bytes) plus the record's varint-framed fields.
func (p *Publisher) fit(r *kgo.Record) fitness {
	size := userSize(r)
	if v, ok := p.client.OptValue(kgo.MaxBufferedBytes).(int64); ok && v > 0 && size > v {
		return fitNever
	}
	limit := int64(1000012) // franz-go's default
	if fn, ok := p.client.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
		limit = int64(fn(r.Topic))
	}
	const batchHeader = 61
	lower := batchHeader + size + 7 + 2*int64(len(r.Headers))
	upper := batchHeader + size + 64 + 10*int64(len(r.Headers))
	switch {
	case lower > limit:
		return fitNever
	case upper > limit:
		return fitMaybe
	}
	return fitSure
}

func userSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}
