package saga

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// StartOpts are per-call options of Start and StartTx. A nil *StartOpts uses the
// defaults.
type StartOpts struct {
	// ID is the saga's id. Default: 32 random hex digits. Give one derived from the
	// request (an order id) to make starting idempotent: a second Start with the
	// same ID returns *AlreadyStartedError. It follows coord.ValidateName (no '/':
	// it is the first half of every idempotency key).
	ID string
	// Delay postpones the first step. Default 0.
	Delay time.Duration
}

// Start starts a saga of definition def with data in its own transaction and
// returns its id once committed; a runner (Client.Run, any process) drives it from
// there, woken by NOTIFY. It blocks for one round trip; ctx cancels it. Errors:
// ErrUnknownType (def is not registered with c: no runner would drive it; see
// [Client.Register]), ErrAlreadyStarted (opts.ID in use), ErrTooLarge /
// ErrInvalidData (data), coord.ErrInvalidName (opts.ID), or the database error.
// Nothing is stored on error.
func Start[T any](ctx context.Context, c *Client, def *Definition[T], data T, opts *StartOpts) (string, error) {
	if c == nil || def == nil {
		return "", fmt.Errorf("%w: nil client or definition", ErrInvalidConfig)
	}
	if err := c.checkRegistered(def.name, def.shape); err != nil {
		return "", err // before any round trip
	}
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return "", fmt.Errorf("saga: start: %w", err)
	}
	defer pgtx.Rollback(ctx, tx)
	id, err := StartTx(ctx, tx, c, def, data, opts)
	if err != nil {
		return "", err
	}
	if err := tx.Commit(ctx); err != nil {
		return "", fmt.Errorf("saga: start: %w", err)
	}
	return id, nil
}

// StartTx starts a saga in the caller's transaction: the saga exists iff tx
// commits (write the order row and start its saga atomically). Runners are notified
// at commit. It blocks for one round trip on tx; ctx cancels it. Errors as [Start];
// on ErrAlreadyStarted and ErrUnknownType the transaction is still usable.
func StartTx[T any](ctx context.Context, tx pgx.Tx, c *Client, def *Definition[T], data T, opts *StartOpts) (string, error) {
	if c == nil || def == nil || tx == nil {
		return "", fmt.Errorf("%w: nil client, definition or transaction", ErrInvalidConfig)
	}
	if err := c.checkRegistered(def.name, def.shape); err != nil {
		return "", err
	}
	var o StartOpts
	if opts != nil {
		o = *opts
	}
	if o.Delay < 0 {
		return "", fmt.Errorf("%w: negative Delay", ErrInvalidConfig)
	}
	if o.ID == "" {
		b := make([]byte, 16)
		rand.Read(b)
		o.ID = hex.EncodeToString(b)
	} else if err := coord.ValidateName("saga id", o.ID, coord.MaxNameLen); err != nil {
		return "", err
	}
	raw, err := encodeJSON("saga data", data, c.cfg.MaxDataBytes)
	if err != nil {
		return "", err
	}
	var id string
	err = tx.QueryRow(ctx, c.q.insert, o.ID, def.name, def.pivot, len(def.steps), raw, secs(o.Delay), c.q.channel, def.stepNames()).Scan(&id)
	if err == pgx.ErrNoRows {
		var typ string
		if err := tx.QueryRow(ctx, c.q.existing, o.ID).Scan(&typ); err != nil {
			return "", fmt.Errorf("saga: start %q: %w", o.ID, err)
		}
		return "", &AlreadyStartedError{ID: o.ID, Type: typ}
	}
	if err != nil {
		return "", fmt.Errorf("saga: start: %w", err)
	}
	return id, nil
}
