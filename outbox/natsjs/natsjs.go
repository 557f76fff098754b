// Package natsjs publishes outbox events to NATS JetStream.
//
// The event id is sent as Nats-Msg-Id, so JetStream's duplicate window drops a
// re-publication of the same event server-side (the ack then says Duplicate);
// it is also sent as the outbox.HeaderEventID header, with the event type and
// the event's own headers (trace context included). Messages of one key are
// published one after another, each waiting for its ack, so a failure never lets
// a later message of the key through; different keys are published concurrently.
package natsjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/outbox"
)

// DefaultConcurrency is Config.Concurrency's default.
const DefaultConcurrency = 32

// Config configures a Publisher. The zero value is valid.
type Config struct {
	// Subject maps an event to a subject. Default: the event's Topic
	// (aggregatetype).
	Subject func(m outbox.Message) string
	// Concurrency is how many keys are published in parallel. Default
	// DefaultConcurrency (32).
	Concurrency int
	// Subjects lists subjects the relay will publish to (after Subject); Check
	// verifies, when the relay starts, that a stream captures each. Default none.
	Subjects []string
}

// Publisher is an outbox.Publisher over JetStream. Safe for concurrent use.
type Publisher struct {
	js       jetstream.JetStream
	subject  func(m outbox.Message) string
	subjects []string
	dups     atomic.Int64
	keyed    *outbox.KeyedPublisher // per key in order, Concurrency keys at once
}

func (c Config) withDefaults() Config {
	if c.Subject == nil {
		c.Subject = func(m outbox.Message) string { return m.Topic }
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	return c
}

func (c Config) validate() error {
	if c.Concurrency < 0 {
		return &outbox.ConfigError{Field: "Concurrency", Reason: "negative"}
	}
	return nil
}

// New returns a Publisher using js; the caller owns the connection and the
// stream (which must capture the subjects). A nil js or an invalid Config is an
// *outbox.ConfigError. No I/O.
func New(js jetstream.JetStream, cfg Config) (*Publisher, error) {
	if js == nil {
		return nil, &outbox.ConfigError{Field: "js", Reason: "nil jetstream.JetStream"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Publisher{js: js, subject: cfg.Subject, subjects: cfg.Subjects}
	keyed, err := outbox.NewKeyedPublisher(outbox.KeyedConfig{Send: p.send, Lanes: cfg.Concurrency})
	if err != nil {
		return nil, err
	}
	p.keyed = keyed
	return p, nil
}

// Duplicates returns how many publications JetStream acknowledged as duplicates
// (same Nats-Msg-Id inside the stream's duplicate window): evidence of
// at-least-once re-publication, absorbed by the server.
func (p *Publisher) Duplicates() int64 { return p.dups.Load() }

// Msg builds the NATS message for m.
func (p *Publisher) Msg(m outbox.Message) *nats.Msg {
	h := make(nats.Header, len(m.Headers)+3)
	for k, v := range m.Headers {
		h.Set(k, v)
	}
	h.Set(outbox.HeaderEventID, m.ID.String())
	h.Set(outbox.HeaderEventType, m.Type)
	h.Set(jetstream.MsgIDHeader, m.ID.String())
	return &nats.Msg{Subject: p.subject(m), Data: m.Payload, Header: h}
}

// Publish publishes msgs, per key in order and waiting for each ack, keys in
// parallel (outbox.KeyedPublisher with Concurrency lanes). It returns nil when
// all were acknowledged, else one error per message (outbox.ErrSkipped after a
// failure of the same key, and for messages not sent because ctx was done). It
// blocks until done or ctx is done.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) []error {
	return p.keyed.Publish(ctx, msgs)
}

// send publishes one message and waits for its ack.
func (p *Publisher) send(ctx context.Context, m outbox.Message) error {
	msg := p.Msg(m)
	ack, err := p.js.PublishMsg(ctx, msg)
	if err != nil {
		return named(msg.Subject, err)
	}
	if ack.Duplicate {
		p.dups.Add(1)
	}
	return nil
}

// Check reports, for each of Options.Subjects, whether a stream captures it: an
// error matching outbox.ErrNoDestination names the first subject no stream
// captures. The relay calls it at start (outbox.Checker).
func (p *Publisher) Check(ctx context.Context) error {
	for _, subj := range p.subjects {
		if _, err := p.js.StreamNameBySubject(ctx, subj); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("natsjs: subject %q: no JetStream stream captures it: %w", subj, outbox.ErrNoDestination)
			}
			return fmt.Errorf("natsjs: subject %q: %w", subj, err)
		}
	}
	return nil
}

// named says which subject a publish error was for, and what "no response from
// stream" usually means.
func named(subject string, err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		return fmt.Errorf("natsjs: subject %q: no JetStream stream answered — none captures the subject, or it is unavailable: %w", subject, err)
	}
	return fmt.Errorf("natsjs: subject %q: %w", subject, err)
}
