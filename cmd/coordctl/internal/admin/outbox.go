package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
)

// OutboxStatus is the outbox's backlog, lag and parked keys.
type OutboxStatus struct {
	Pending                 int64       `json:"pending"`
	OldestPendingAgeSeconds float64     `json:"oldest_pending_age_seconds"`
	PublishLagP99Seconds    float64     `json:"publish_lag_p99_seconds"` // of the events published in the last window
	PublishedInWindow       int64       `json:"published_in_window"`
	WindowSeconds           float64     `json:"window_seconds"`
	Parked                  int64       `json:"parked"`
	ParkedKeys              []ParkedKey `json:"parked_keys"` // the oldest 100 of ParkedKeyCount
	ParkedKeyCount          int64       `json:"parked_key_count"`
}

// ParkedKey is a key stopped by parked events.
type ParkedKey struct {
	Key      string    `json:"key"`
	Parked   int64     `json:"parked"`
	Blocked  int64     `json:"blocked"` // its pending events waiting behind them
	ParkedAt time.Time `json:"parked_at"`
}

// ParkedEvent is one event in the dead-letter table.
type ParkedEvent struct {
	ID           string            `json:"id"`
	Seq          int64             `json:"seq"`
	Topic        string            `json:"topic"`
	Key          string            `json:"key"`
	Type         string            `json:"type"`
	Attempts     int               `json:"attempts"`
	LastError    string            `json:"last_error"`
	CreatedAt    time.Time         `json:"created_at"`
	ParkedAt     time.Time         `json:"parked_at"`
	PayloadBytes int               `json:"payload_bytes"`
	Payload      string            `json:"payload,omitempty"` // the first 1 KiB, when it is UTF-8
	Headers      map[string]string `json:"headers,omitempty"`
	// Version identifies this parking (id, when and how often it was parked):
	// pass it as --expect, as the console's form does.
	Version string `json:"version"`
}

// ParkedOutcome is a parked event after a requeue (back in the outbox at its
// original position, the head of its key) or a discard (deleted).
type ParkedOutcome struct {
	ID       string `json:"id"`
	Parked   bool   `json:"parked"`
	Requeued bool   `json:"requeued"`
}

// maxPayloadShown bounds the payload a view carries.
const maxPayloadShown = 1024

// OutboxStatus reads the backlog, lag and parked keys.
func (a *Admin) OutboxStatus(ctx context.Context) (OutboxStatus, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return OutboxStatus{}, err
	}
	s, err := a.ob.Status(ctx, pool)
	if err != nil {
		return OutboxStatus{}, err
	}
	out := OutboxStatus{Pending: s.Pending, OldestPendingAgeSeconds: seconds(s.OldestPendingAge), PublishLagP99Seconds: seconds(s.PublishLagP99),
		PublishedInWindow: s.PublishedInWindow, WindowSeconds: outbox.StatusWindow.Seconds(), Parked: s.Parked, ParkedKeys: []ParkedKey{},
		ParkedKeyCount: s.ParkedKeyCount}
	for _, k := range s.ParkedKeys {
		out.ParkedKeys = append(out.ParkedKeys, ParkedKey(k))
	}
	return out, nil
}

// Parked lists up to limit parked events, in outbox order.
func (a *Admin) Parked(ctx context.Context, limit int) ([]ParkedEvent, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	res, err := a.ob.ParkedList(ctx, pool, &outbox.ParkedListOpts{Limit: limit, MaxPayload: maxPayloadShown})
	if err != nil {
		return nil, err
	}
	out := make([]ParkedEvent, 0, len(res.Events))
	for _, p := range res.Events {
		out = append(out, parkedOf(p))
	}
	return out, nil
}

func parkedOf(p outbox.ParkedEvent) ParkedEvent {
	e := ParkedEvent{ID: p.ID.String(), Seq: p.Seq, Topic: p.Topic, Key: p.Key, Type: p.Type, Attempts: p.Attempts,
		LastError: p.LastError, CreatedAt: p.CreatedAt, ParkedAt: p.ParkedAt, PayloadBytes: p.PayloadBytes, Headers: p.Headers,
		Version: version(p.ID.String(), strconv.FormatInt(p.ParkedAt.UnixMicro(), 10), strconv.Itoa(p.Attempts))}
	shown := p.Payload[:min(len(p.Payload), maxPayloadShown)]
	for len(shown) > 0 && !utf8.Valid(shown) { // a rune cut by the bound
		shown = shown[:len(shown)-1]
	}
	e.Payload = string(shown)
	return e
}

// ParkedEvent returns one parked event (outbox.ErrNotFound if it is not). It reads
// through ParkedLockTx in a transaction it rolls back at once.
func (a *Admin) ParkedEvent(ctx context.Context, idText string) (ParkedEvent, error) {
	id, err := parseEventID(idText)
	if err != nil {
		return ParkedEvent{}, err
	}
	pool, err := a.db(ctx)
	if err != nil {
		return ParkedEvent{}, err
	}
	var e ParkedEvent
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		p, err := a.ob.ParkedLockTx(ctx, tx, id)
		e = parkedOf(p)
		return err
	})
	return e, err
}

// Requeue moves a parked event back into the outbox.
func (a *Admin) Requeue(ctx context.Context, id string, req Request) (Change, error) {
	return a.parkedMutation(ctx, "outbox.requeue", id, req, a.ob.ParkedRequeue)
}

// Discard deletes a parked event for good; its key's later events flow.
func (a *Admin) Discard(ctx context.Context, id string, req Request) (Change, error) {
	return a.parkedMutation(ctx, "outbox.discard", id, req, a.ob.ParkedDiscard)
}

func (a *Admin) parkedMutation(ctx context.Context, action, idText string, req Request,
	apply func(context.Context, outbox.Beginner, outbox.ID) error) (Change, error) {
	id, err := parseEventID(idText)
	if err != nil {
		return Change{}, err
	}
	return a.mutate(ctx, op{
		action: action, target: id.String(),
		lock: func(ctx context.Context, tx pgx.Tx) (any, string, error) {
			p, err := a.ob.ParkedLockTx(ctx, tx, id)
			if err != nil {
				return nil, "", err
			}
			e := parkedOf(p)
			return e, e.Version, nil
		},
		gone: func(err error) bool { return errors.Is(err, outbox.ErrNotFound) },
		apply: func(ctx context.Context, tx pgx.Tx, _ any) error {
			if err := apply(ctx, tx, id); err != nil {
				return fmt.Errorf("%s: %w", action, err)
			}
			return nil
		},
		after: func(ctx context.Context, tx pgx.Tx) (any, error) {
			_, err := a.ob.ParkedLockTx(ctx, tx, id)
			switch {
			case errors.Is(err, outbox.ErrNotFound):
				return ParkedOutcome{ID: id.String(), Parked: false, Requeued: action == "outbox.requeue"}, nil
			case err != nil:
				return nil, err
			}
			return nil, fmt.Errorf("coordctl: %s %s: still parked after the change", action, id)
		},
	}, req)
}

// parseEventID reads an event id argument (an *ArgError when it is none).
func parseEventID(s string) (outbox.ID, error) {
	if err := checkID("event id", s); err != nil {
		return outbox.ID{}, err
	}
	id, err := outbox.ParseID(s)
	if err != nil {
		return outbox.ID{}, &ArgError{Arg: "event id", Reason: err.Error()}
	}
	return id, nil
}
