package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"

	"github.com/coordkit/coordkit/internal/pgtext"
)

// EnqueueTx validates e and inserts it into the outbox in the caller's transaction
// tx: the event exists if and only if tx commits. It is the only way in.
//
// It takes a per-key transaction-scoped advisory lock (so two transactions
// enqueueing for the same key commit in the order of their rows; a second one
// blocks until the first ends) and, unless Config.DisableNotify, notifies the
// relays when tx commits. The trace context of ctx is added to the headers.
//
// It returns the event id, an *EventError (matching ErrInvalidEvent) when e is
// rejected — nothing is written, tx is still usable — or the database error
// (the caller rolls back). ctx cancels the statement.
func (o *Outbox) EnqueueTx(ctx context.Context, tx pgx.Tx, e Event) (ID, error) {
	if err := e.validate(o.cfg.MaxPayloadBytes); err != nil {
		o.m.rejected.Add(ctx, 1)
		return ID{}, err
	}
	h, err := o.headers(ctx, e.Headers)
	if err != nil {
		return ID{}, err
	}
	id := NewID(time.Now())
	args := []any{id.String(), e.Topic, e.Key, e.Type, string(e.Payload), e.JSON, h, o.enqueueClass}
	q := o.sql.insert
	if !o.cfg.DisableNotify {
		q = o.sql.insertNotify
		args = append(args, o.cfg.Channel)
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return ID{}, fmt.Errorf("outbox: enqueue: %w", err)
	}
	return id, nil
}

// EnqueueBatchTx is EnqueueTx for several events in one statement; their order in
// events is their publication order per key. Validation is all-or-nothing: the
// first invalid event is reported (EventError.Index says which) and nothing is
// written. It returns the ids in the order of events.
func (o *Outbox) EnqueueBatchTx(ctx context.Context, tx pgx.Tx, events []Event) ([]ID, error) {
	if len(events) == 0 {
		return nil, nil
	}
	n := len(events)
	ids := make([]ID, n)
	sID, topics, keys, types, payloads := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	jsons, hdrs := make([]bool, n), make([]string, n)
	now := time.Now()
	for i := range events {
		e := &events[i]
		if err := e.validate(o.cfg.MaxPayloadBytes); err != nil {
			o.m.rejected.Add(ctx, 1)
			if ee, ok := err.(*EventError); ok {
				ee.Index = i
			}
			return nil, err
		}
		h, err := o.headers(ctx, e.Headers)
		if err != nil {
			return nil, err
		}
		ids[i] = NewID(now)
		sID[i], topics[i], keys[i], types[i], payloads[i], jsons[i], hdrs[i] = ids[i].String(), e.Topic, e.Key, e.Type, string(e.Payload), e.JSON, h
	}
	args := []any{sID, topics, keys, types, payloads, jsons, hdrs, o.enqueueClass}
	q := o.sql.insertBatch
	if !o.cfg.DisableNotify {
		q = o.sql.insertBatchNotify
		args = append(args, o.cfg.Channel)
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		return nil, fmt.Errorf("outbox: enqueue batch: %w", err)
	}
	return ids, nil
}

// headers returns the user headers plus the trace context of ctx, as JSON. The
// user's headers are validated; what the propagator adds is made storable (jsonb
// refuses NUL and invalid UTF-8) and bounded, key and value, by MaxHeaderBytes.
func (o *Outbox) headers(ctx context.Context, user map[string]string) (string, error) {
	derived := make(propagation.MapCarrier, 2)
	o.cfg.Propagator.Inject(ctx, derived)
	h := make(map[string]string, len(user)+len(derived))
	for k, v := range user {
		h[k] = v
	}
	for k, v := range derived { // the propagator's fields win, as when it injects over the user's
		h[pgtext.Clean(k, MaxHeaderBytes)] = pgtext.Clean(v, MaxHeaderBytes)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return "", fmt.Errorf("outbox: headers: %w", err)
	}
	return string(b), nil
}
