package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// DefaultMaxDeliveries is ConsumerConfig.MaxDeliveries's default.
const DefaultMaxDeliveries = 10

// ConsumerConfig configures a Consumer of broker messages of type M
// (jetstream.Msg in outbox/natsjs, *kgo.Record in outbox/kafka). Every field
// states its default.
type ConsumerConfig[M any] struct {
	// Name scopes the dedupe: the inbox records (Name, event id). 1–200
	// printable ASCII bytes. Required.
	Name string
	// DB opens the transaction each delivery is handled in (a *pgxpool.Pool).
	// Required.
	DB Beginner
	// Inbox dedupes on the event id in that transaction. Required.
	Inbox *Inbox
	// Handler applies a message's effect in tx, which commits together with the
	// inbox record: once committed, later deliveries of the event are skipped.
	// An error rolls tx back and the message is retried with Backoff. Required.
	Handler func(ctx context.Context, tx pgx.Tx, msg M) error
	// MaxDeliveries: a message whose Handler fails on its MaxDeliveries-th
	// delivery (or a later one) is given up — handed to DeadLetter, if set, then
	// acknowledged as terminated. Database failures (begin, the inbox insert,
	// commit) never give a message up. Default DefaultMaxDeliveries.
	MaxDeliveries int
	// Backoff spaces the retries of a failed delivery (full jitter). Default
	// coord.Backoff{}: 100 ms doubling to 30 s.
	Backoff coord.Backoff
	// DeadLetter, if set, receives each message given up (and each message
	// without an event id) with the reason, a *HandlerError or ErrMissingEventID,
	// before the message is terminated. If it returns an error the message is
	// retried instead, so nothing is dropped that was not dead-lettered. Default
	// nil: the message is logged and terminated.
	DeadLetter func(ctx context.Context, msg M, cause error) error
	// Logger receives failures. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider provides the consumer metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

func (c ConsumerConfig[M]) withDefaults() ConsumerConfig[M] {
	c.MaxDeliveries = cmp.Or(c.MaxDeliveries, DefaultMaxDeliveries)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

func (c ConsumerConfig[M]) validate() error {
	switch {
	case !consumerName.MatchString(c.Name):
		return &ConfigError{Field: "Name", Reason: "1-200 printable ASCII bytes"}
	case c.DB == nil:
		return &ConfigError{Field: "DB", Reason: "required"}
	case c.Inbox == nil:
		return &ConfigError{Field: "Inbox", Reason: "required"}
	case c.Handler == nil:
		return &ConfigError{Field: "Handler", Reason: "required"}
	case c.MaxDeliveries < 1:
		return &ConfigError{Field: "MaxDeliveries", Reason: "must be ≥ 1"}
	}
	return nil
}

// Errors a Consumer reports.
var (
	// ErrMissingEventID: a delivery carries no event id (HeaderEventID), so it
	// cannot be deduplicated; it is given up at once.
	ErrMissingEventID = errors.New("outbox: delivery without an event id")
)

// HandlerError is why a Consumer gave a message up: its Handler failed on the
// delivery numbered Delivery, the MaxDeliveries-th or later. It unwraps to the
// Handler's error.
type HandlerError struct {
	Consumer string
	EventID  string
	Delivery int
	Err      error
}

// Error names the consumer, the event and the delivery.
func (e *HandlerError) Error() string {
	return fmt.Sprintf("outbox: consumer %s: event %s: handler failed on delivery %d: %v", e.Consumer, e.EventID, e.Delivery, e.Err)
}

// Unwrap returns the Handler's error.
func (e *HandlerError) Unwrap() error { return e.Err }

// Action is what a broker loop does with a delivery after Consumer.Handle.
type Action int

const (
	// Ack: the effect is committed (by this delivery, or an earlier one: a
	// duplicate). Acknowledge the message / commit past its offset.
	Ack Action = iota + 1
	// Retry: nothing was committed. Deliver the message again after
	// Verdict.Delay (NATS: NakWithDelay; Kafka: retry in place).
	Retry
	// Drop: the message was given up (and dead-lettered, if configured).
	// Terminate it / commit past its offset.
	Drop
)

// String returns "ack", "retry" or "drop".
func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Drop:
		return "drop"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Verdict is the outcome of Consumer.Handle.
type Verdict struct {
	Action Action
	Delay  time.Duration // for Retry
	Err    error         // why, for Retry and Drop
}

// Consumer is the consumer half of the outbox, for any broker: it turns
// at-least-once deliveries into effectively-once effects by running the Handler
// in a transaction with the inbox record of the event id, and tells the broker
// loop what to do with each delivery. outbox/natsjs and outbox/kafka run it over
// their brokers; for another broker, call Handle from its receive loop. It holds
// no connection and is safe for concurrent use.
type Consumer[M any] struct {
	cfg   ConsumerConfig[M]
	attrs metric.MeasurementOption
	m     consumerMetrics
}

// NewConsumer validates cfg (after defaults) and returns a Consumer. It returns an
// error matching ErrInvalidConfig for a missing or invalid field. No I/O.
func NewConsumer[M any](cfg ConsumerConfig[M]) (*Consumer[M], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, err := newConsumerMetrics(cfg.MeterProvider)
	if err != nil {
		return nil, err
	}
	return &Consumer[M]{cfg: cfg, m: m, attrs: metric.WithAttributes(attribute.String(attrConsumer, cfg.Name))}, nil
}

// Config returns the defaulted configuration.
func (c *Consumer[M]) Config() ConsumerConfig[M] { return c.cfg }

// Handle processes one delivery of msg: eventID is its HeaderEventID, delivery
// how many times the broker has delivered it (1 the first time). It begins a
// transaction on DB, records (Name, eventID) in the inbox and runs Handler in it,
// then commits; a duplicate is skipped without calling Handler (counted in
// coordkit.outbox.inbox.duplicates). It blocks for the transaction and Handler; ctx
// cancels them up to Handler's return (the Verdict is then Retry with ctx's
// error and no delay), not the commit that follows a successful Handler.
func (c *Consumer[M]) Handle(ctx context.Context, msg M, eventID string, delivery int) Verdict {
	if delivery > 1 {
		c.m.redeliveries.Add(ctx, 1, c.attrs)
	}
	if eventID == "" {
		return c.giveUp(ctx, msg, "", delivery, ErrMissingEventID)
	}
	ran, herr, err := c.process(ctx, msg, eventID)
	switch {
	case err == nil:
		if ran {
			c.m.processed.Add(ctx, 1, c.attrs)
		}
		return Verdict{Action: Ack}
	case ctx.Err() != nil:
		return Verdict{Action: Retry, Err: err}
	case herr != nil:
		c.m.failures.Add(ctx, 1, c.attrs)
		if delivery >= c.cfg.MaxDeliveries {
			return c.giveUp(ctx, msg, eventID, delivery, &HandlerError{Consumer: c.cfg.Name, EventID: eventID, Delivery: delivery, Err: herr})
		}
		c.cfg.Logger.WarnContext(ctx, "outbox consumer: handler failed; retrying",
			"consumer", c.cfg.Name, "event_id", eventID, "delivery", delivery, "err", herr)
		return Verdict{Action: Retry, Delay: c.cfg.Backoff.Delay(delivery - 1), Err: herr}
	case errors.Is(err, ErrInvalidEvent): // an event id the inbox cannot store
		return c.giveUp(ctx, msg, eventID, delivery, err)
	}
	c.cfg.Logger.WarnContext(ctx, "outbox consumer: database failed; retrying",
		"consumer", c.cfg.Name, "event_id", eventID, "delivery", delivery, "err", err)
	return Verdict{Action: Retry, Delay: c.cfg.Backoff.Delay(delivery - 1), Err: err}
}

// commitTimeout bounds the commit of a handled delivery, which ctx does not
// cancel.
const commitTimeout = 10 * time.Second

// process runs Handler for msg in a transaction with the inbox record and
// commits. Once Handler has succeeded, the commit is not cancelled with ctx
// (bounded by commitTimeout): a consumer stopping at that moment still knows
// whether the effect committed, and acknowledges it. herr is Handler's error.
func (c *Consumer[M]) process(ctx context.Context, msg M, eventID string) (ran bool, herr, err error) {
	tx, err := c.cfg.DB.Begin(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("outbox: consumer %s: begin: %w", c.cfg.Name, err)
	}
	ran, err = c.cfg.Inbox.ProcessTx(ctx, tx, c.cfg.Name, eventID, func(ctx context.Context, tx pgx.Tx) error {
		herr = c.cfg.Handler(ctx, tx, msg)
		return herr
	})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	if err != nil {
		_ = tx.Rollback(cctx)
		return false, herr, err
	}
	if err := tx.Commit(cctx); err != nil {
		return false, nil, fmt.Errorf("outbox: consumer %s: commit: %w", c.cfg.Name, err)
	}
	return ran, nil, nil
}

// giveUp dead-letters msg (if configured) and drops it; if dead-lettering fails,
// the message is retried instead.
func (c *Consumer[M]) giveUp(ctx context.Context, msg M, eventID string, delivery int, cause error) Verdict {
	if c.cfg.DeadLetter != nil {
		if err := c.cfg.DeadLetter(ctx, msg, cause); err != nil {
			c.cfg.Logger.ErrorContext(ctx, "outbox consumer: dead-lettering failed; retrying the message",
				"consumer", c.cfg.Name, "event_id", eventID, "delivery", delivery, "cause", cause, "err", err)
			return Verdict{Action: Retry, Delay: c.cfg.Backoff.Delay(delivery - 1), Err: err}
		}
	}
	c.m.dropped.Add(ctx, 1, c.attrs)
	c.cfg.Logger.ErrorContext(ctx, "outbox consumer: message given up",
		"consumer", c.cfg.Name, "event_id", eventID, "delivery", delivery, "dead_lettered", c.cfg.DeadLetter != nil, "err", cause)
	return Verdict{Action: Drop, Err: cause}
}
