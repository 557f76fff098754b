package outbox

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
)

// KeyedConfig says how a KeyedPublisher reaches its broker: one message at a
// time (Send) or in batches (SendBatch). Set exactly one of the two.
type KeyedConfig struct {
	// Send publishes one message and returns once the broker durably accepted
	// it (nil) or refused it. Each key is published in a lane of its own, one
	// message after another; Lanes keys at once. It must return when ctx is done.
	Send func(ctx context.Context, m Message) error
	// Lanes is how many keys Send publishes in parallel. Default
	// DefaultKeyedLanes (1: one message at a time, in the batch's order).
	Lanes int
	// SendBatch publishes a wave of messages at once and returns nil or one
	// error per message (nil: durably accepted). A wave holds, per key, a run
	// of the key's next messages in order; within a run, a message after a
	// failed one must not be accepted (fail it too), as a Kafka partition
	// written by an idempotent producer does. It must return when ctx is done.
	SendBatch func(ctx context.Context, msgs []Message) []error
	// Admit decides, with SendBatch, whether m (the next message of its key)
	// joins the wave being built; prev is the key's previous message in that
	// wave, nil when m would be the first. A non-nil error fails m without
	// sending it. Default: every message joins (AdmitJoin).
	Admit func(m Message, prev *Message) (Admission, error)
}

// DefaultKeyedLanes is KeyedConfig.Lanes's default.
const DefaultKeyedLanes = 1

// Admission is Admit's answer for a message.
type Admission int

// Admissions.
const (
	// AdmitJoin: m joins the wave; the key's next message may join too.
	AdmitJoin Admission = iota
	// AdmitLast: m joins the wave and ends its key's run in it (a message the
	// broker might refuse on its own: the key's next messages wait for the
	// wave's outcome).
	AdmitLast
	// AdmitNext: m waits for the next wave (its key's run ends before it).
	// The first message of a key in a wave always joins.
	AdmitNext
)

func (c KeyedConfig) withDefaults() KeyedConfig {
	c.Lanes = cmp.Or(c.Lanes, DefaultKeyedLanes)
	if c.SendBatch != nil && c.Admit == nil {
		c.Admit = func(Message, *Message) (Admission, error) { return AdmitJoin, nil }
	}
	return c
}

func (c KeyedConfig) validate() error {
	switch {
	case (c.Send == nil) == (c.SendBatch == nil):
		return &ConfigError{Field: "Send", Reason: "set exactly one of Send and SendBatch"}
	case c.Lanes < 1:
		return &ConfigError{Field: "Lanes", Reason: "below 1"}
	}
	return nil
}

// KeyedPublisher is the per-key core of every Publisher in this module
// (PublisherFunc, outbox/natsjs, outbox/kafka), and of one a user writes for
// another broker: it keeps the Publisher contract so the adapter only moves
// bytes. It groups a batch by key and keeps each key's messages in order; it
// stops a key at its first failure (its later messages report ErrSkipped, never
// sent); once ctx is done it sends nothing more (the rest report ErrSkipped: not
// attempts); it returns nil or one error per message. testing/publishtest
// certifies an adapter built on it (or not) against a real broker. Safe for
// concurrent use.
type KeyedPublisher struct {
	cfg KeyedConfig
}

// NewKeyedPublisher validates cfg (after defaults) and returns the core. An
// invalid Config is a *ConfigError (ErrInvalidConfig). No I/O.
func NewKeyedPublisher(cfg KeyedConfig) (*KeyedPublisher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &KeyedPublisher{cfg: cfg}, nil
}

// Publish implements Publisher. It blocks until every message was accepted,
// refused or skipped, or ctx is done.
func (p *KeyedPublisher) Publish(ctx context.Context, msgs []Message) []error {
	b := &keyedBatch{msgs: msgs, errs: make([]error, len(msgs))}
	switch {
	case p.cfg.SendBatch != nil:
		b.waves(ctx, p.cfg.SendBatch, p.cfg.Admit)
	case p.cfg.Lanes == 1:
		b.inOrder(ctx, p.cfg.Send)
	default:
		b.lanes(ctx, p.cfg.Send, p.cfg.Lanes)
	}
	if !b.anyErr.Load() {
		return nil
	}
	return b.errs
}

// keyedBatch is one Publish call's state. errs[i] is written by the one
// goroutine that handles message i's key.
type keyedBatch struct {
	msgs   []Message
	errs   []error
	anyErr atomic.Bool
}

func (b *keyedBatch) set(i int, err error) {
	b.errs[i] = err
	b.anyErr.Store(true)
}

// inOrder sends one message at a time in the batch's order, skipping the keys
// that failed.
func (b *keyedBatch) inOrder(ctx context.Context, send func(context.Context, Message) error) {
	failed := map[string]bool{}
	for i, m := range b.msgs {
		if failed[m.Key] || ctx.Err() != nil {
			b.set(i, ErrSkipped)
			continue
		}
		if err := send(ctx, m); err != nil {
			b.set(i, err)
			failed[m.Key] = true
		}
	}
}

// byKey groups the batch's indices by key, keys in order of first appearance.
func (b *keyedBatch) byKey() [][]int {
	at := map[string]int{}
	var keys [][]int
	for i, m := range b.msgs {
		k, ok := at[m.Key]
		if !ok {
			k = len(keys)
			at[m.Key] = k
			keys = append(keys, nil)
		}
		keys[k] = append(keys[k], i)
	}
	return keys
}

// lanes sends each key's messages one after another, n keys at once.
func (b *keyedBatch) lanes(ctx context.Context, send func(context.Context, Message) error, n int) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, idx := range b.byKey() {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for at, i := range idx {
				err := ctx.Err()
				if err == nil {
					err = send(ctx, b.msgs[i])
				} else {
					err = ErrSkipped // not sent: not an attempt
				}
				if err != nil {
					b.set(i, err)
					for _, j := range idx[at+1:] {
						b.set(j, ErrSkipped)
					}
					return
				}
			}
		}()
	}
	wg.Wait()
}

// waves sends the batch in waves: each holds, per key, the run of the key's
// next messages that admit lets through; the next wave starts once the last
// one was answered and leaves out the keys that failed.
func (b *keyedBatch) waves(ctx context.Context, send func(context.Context, []Message) []error, admit func(Message, *Message) (Admission, error)) {
	failed := map[string]bool{}
	fail := func(i int, err error) {
		b.set(i, err)
		failed[b.msgs[i].Key] = true
	}
	pending := make([]int, len(b.msgs))
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		if ctx.Err() != nil { // not sent: not attempts
			for _, i := range pending {
				b.set(i, ErrSkipped)
			}
			return
		}
		var wave, rest []int
		closed := map[string]bool{} // keys whose run in this wave has ended
		last := map[string]int{}    // each key's last message in this wave
		for _, i := range pending {
			k := b.msgs[i].Key
			switch {
			case failed[k]:
				b.set(i, ErrSkipped)
				continue
			case closed[k]:
				rest = append(rest, i)
				continue
			}
			var prev *Message
			if j, ok := last[k]; ok {
				prev = &b.msgs[j]
			}
			a, err := admit(b.msgs[i], prev)
			if err != nil {
				fail(i, err)
				continue
			}
			if a == AdmitNext && prev != nil {
				closed[k] = true
				rest = append(rest, i)
				continue
			}
			if a == AdmitLast {
				closed[k] = true
			}
			last[k] = i
			wave = append(wave, i)
		}
		if len(wave) > 0 {
			batch := make([]Message, len(wave))
			for j, i := range wave {
				batch[j] = b.msgs[i]
			}
			if errs := send(ctx, batch); errs != nil {
				for j, i := range wave {
					if j < len(errs) && errs[j] != nil {
						fail(i, errs[j])
					}
				}
			}
		}
		pending = rest
	}
}
