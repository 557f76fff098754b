package outbox

import "context"

// Publisher sends messages to a broker. The relay calls Publish with a batch in
// outbox order (messages of one key in seq order) and marks as published exactly
// the messages whose error is nil.
//
// Contract: Publish returns nil (all published) or a slice of len(msgs) errors.
// A message whose error is nil must be durably accepted by the broker. Within one
// key, once a message fails, no later message of that key may be published in the
// same call (report ErrSkipped for them): that is what keeps per-key order. It
// must return when ctx is done. It may be called concurrently by several relays.
type Publisher interface {
	Publish(ctx context.Context, msgs []Message) []error
}

// Checker is implemented by a Publisher that can verify, before a relay starts,
// that the broker has somewhere to put what it will publish (JetStream streams
// for its subjects, Kafka topics). Relay.Run calls Check once: an error matching
// ErrNoDestination is returned from Run at once (a misconfiguration, named);
// any other error is logged and the relay starts anyway (publishing retries).
type Checker interface {
	Check(ctx context.Context) error
}

// PublisherFunc adapts a one-message function to Publisher: messages are sent one
// at a time in order; after a failure, the rest of that key's messages report
// ErrSkipped while other keys continue. Once ctx is done, the messages not yet
// sent report ErrSkipped too: they were not attempted, so they do not count
// toward MaxAttempts. It is a KeyedPublisher with one lane.
type PublisherFunc func(ctx context.Context, m Message) error

// Publish implements Publisher.
func (f PublisherFunc) Publish(ctx context.Context, msgs []Message) []error {
	p := KeyedPublisher{cfg: KeyedConfig{Send: f, Lanes: 1}}
	return p.Publish(ctx, msgs)
}
