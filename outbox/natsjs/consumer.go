package natsjs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/coordkit/coordkit/outbox"
)

// ConsumerConfig configures a Consumer: the inbox, the pool, the handler and
// what happens to a message that keeps failing. See outbox.ConsumerConfig.
type ConsumerConfig = outbox.ConsumerConfig[jetstream.Msg]

// handover is how long a message nak'ed by a stopping Consumer waits before it
// is redelivered: long enough for the subscription to be gone.
const handover = time.Second

// ErrUnsuitableConsumer: the JetStream consumer is configured so that the
// helper cannot keep its promises (acks not explicit, or the server gives
// messages up before MaxDeliveries).
var ErrUnsuitableConsumer = errors.New("natsjs: unsuitable JetStream consumer")

// Consumer delivers a JetStream consumer's messages to a handler effectively
// once: each message runs in a transaction with its inbox record
// (outbox.Consumer) and is acknowledged only after that transaction committed;
// a failure is negatively acknowledged with backoff (NakWithDelay); a message
// whose handler fails on its MaxDeliveries-th delivery is dead-lettered (if
// configured) and terminated. Messages are handled one at a time, in delivery
// order. JetStream redelivers a nak'ed message after later ones: set the
// JetStream consumer's MaxAckPending to 1 where the order of effects across a
// failure matters.
type Consumer struct {
	core  *outbox.Consumer[jetstream.Msg]
	info  func(context.Context) (*jetstream.ConsumerInfo, error)
	start func(jetstream.MessageHandler, jetstream.ConsumeErrHandlerFunc) (jetstream.ConsumeContext, error)
}

// NewConsumer returns a Consumer over a pull consumer (js.CreateOrUpdateConsumer
// or js.Consumer), which the caller creates with AckPolicy explicit and a
// MaxDeliver of at least cfg.MaxDeliveries (or unlimited). It returns an error
// matching outbox.ErrInvalidConfig for a bad cfg. No I/O.
func NewConsumer(c jetstream.Consumer, cfg ConsumerConfig) (*Consumer, error) {
	if c == nil {
		return nil, &outbox.ConfigError{Field: "consumer", Reason: "required"}
	}
	return newConsumer(cfg, c.Info, func(h jetstream.MessageHandler, eh jetstream.ConsumeErrHandlerFunc) (jetstream.ConsumeContext, error) {
		return c.Consume(h, jetstream.ConsumeErrHandler(eh))
	})
}

// NewPushConsumer is NewConsumer over a push consumer
// (js.CreateOrUpdatePushConsumer).
func NewPushConsumer(c jetstream.PushConsumer, cfg ConsumerConfig) (*Consumer, error) {
	if c == nil {
		return nil, &outbox.ConfigError{Field: "consumer", Reason: "required"}
	}
	return newConsumer(cfg, c.Info, func(h jetstream.MessageHandler, eh jetstream.ConsumeErrHandlerFunc) (jetstream.ConsumeContext, error) {
		return c.Consume(h, jetstream.ConsumeErrHandler(eh))
	})
}

func newConsumer(cfg ConsumerConfig, info func(context.Context) (*jetstream.ConsumerInfo, error),
	start func(jetstream.MessageHandler, jetstream.ConsumeErrHandlerFunc) (jetstream.ConsumeContext, error)) (*Consumer, error) {
	core, err := outbox.NewConsumer(cfg)
	if err != nil {
		return nil, err
	}
	return &Consumer{core: core, info: info, start: start}, nil
}

// Run consumes until ctx is done, then stops the subscription and returns nil
// once the message in hand is finished: its transaction is rolled back by the
// cancellation, and it and the messages buffered for this subscription are
// negatively acknowledged, so they are redelivered at once to another consumer.
//
// It first reads the consumer's info: a consumer or stream that does not exist
// is reported at once (wrapping jetstream.ErrConsumerNotFound or
// ErrStreamNotFound, with the names), as is an unsuitable configuration
// (ErrUnsuitableConsumer). It returns an error if the consumer is deleted while
// it runs.
func (c *Consumer) Run(ctx context.Context) error {
	info, err := c.info(ctx)
	if err != nil {
		return fmt.Errorf("natsjs: consumer info: %w", err)
	}
	name := fmt.Sprintf("consumer %q of stream %q", info.Name, info.Stream)
	maxDeliveries := c.core.Config().MaxDeliveries
	switch {
	case info.Config.AckPolicy != jetstream.AckExplicitPolicy:
		return fmt.Errorf("%w: %s has AckPolicy %s, want explicit", ErrUnsuitableConsumer, name, info.Config.AckPolicy)
	case info.Config.MaxDeliver > 0 && info.Config.MaxDeliver < maxDeliveries:
		return fmt.Errorf("%w: %s has MaxDeliver %d < MaxDeliveries %d: the server would stop redelivering before the message is dead-lettered",
			ErrUnsuitableConsumer, name, info.Config.MaxDeliver, maxDeliveries)
	}
	fatal := make(chan error, 1)
	cc, err := c.start(func(msg jetstream.Msg) { c.handle(ctx, msg) }, func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			select {
			case fatal <- fmt.Errorf("natsjs: %s: %w", name, err):
			default:
			}
		}
	})
	if err != nil {
		return fmt.Errorf("natsjs: consume %s: %w", name, err)
	}
	select {
	case <-ctx.Done():
	case err = <-fatal:
	}
	// Drain, not Stop: messages already buffered for this subscription go
	// through handle, which (ctx being done) naks them at once, so another
	// consumer gets them now rather than after AckWait.
	cc.Drain()
	<-cc.Closed()
	return err
}

// handle runs one message through the core and settles it with the server.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	delivery := 1
	if md, err := msg.Metadata(); err == nil && md.NumDelivered > 0 {
		delivery = int(min(md.NumDelivered, 1<<30))
	}
	id := msg.Headers().Get(outbox.HeaderEventID)
	if id == "" {
		id = msg.Headers().Get(jetstream.MsgIDHeader)
	}
	v := c.core.Handle(ctx, msg, id, delivery)
	var err error
	switch {
	case v.Action == outbox.Ack && ctx.Err() == nil:
		// Wait for the server's confirmation: a lost ack is a redelivery
		// (skipped as a duplicate), but a confirmed one is not.
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = msg.DoubleAck(actx)
		cancel()
	case v.Action == outbox.Ack:
		err = msg.Ack()
	case v.Action == outbox.Drop:
		err = msg.TermWithReason(pgtext.Clean(v.Err.Error(), 256))
	case ctx.Err() != nil:
		// Stopping: hand it back, but not at once — this draining subscription
		// would be sent it again — so that the next consumer gets it.
		err = msg.NakWithDelay(handover)
	default:
		err = msg.NakWithDelay(v.Delay)
	}
	if err != nil {
		c.core.Config().Logger.WarnContext(ctx, "natsjs consumer: settling a message failed; it will be redelivered",
			"consumer", c.core.Config().Name, "event_id", id, "action", v.Action, "err", err)
	}
}
