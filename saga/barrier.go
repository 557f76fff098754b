package saga

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// Barrier is the participant side of a saga step, in the participant's own
// Postgres: run the step's effect through ActionTx and its compensation through
// CompensateTx, in the same transaction as the effect, and
//
//   - a duplicate call (a retry after a timeout, a runner that crashed after the
//     call) does nothing the second time;
//   - a compensation of a step that never ran (a "null compensation") does nothing;
//   - an action that arrives after its compensation (a "hanging" action, delayed in
//     the network) does nothing.
//
// It is dtm's sub-transaction barrier: a table keyed by (saga id, step, op). The
// compensation first inserts the action's row, so an action that comes later finds
// it taken. Safe for concurrent use.
type Barrier struct {
	ins, reason string // the statements, with the quoted table name
	schema      pgschema.Component
}

// DefaultBarrierTable is the barrier table's name when BarrierConfig.Table is empty.
const DefaultBarrierTable = "coord_saga_barrier"

// BarrierConfig configures a Barrier. The zero value is valid.
type BarrierConfig struct {
	// Schema holds the barrier table. Default "": the connection's search_path.
	Schema string
	// Table is the barrier table, in the participant's database. Default
	// DefaultBarrierTable. Any printable UTF-8 without '.' of at most 63 bytes;
	// always quoted. It must not name a saga table (Migrate refuses a relation it
	// did not create).
	Table string
}

func (c BarrierConfig) withDefaults() BarrierConfig {
	c.Table = cmp.Or(c.Table, DefaultBarrierTable)
	return c
}

func (c BarrierConfig) validate() error {
	if ne := pgschema.CheckTable(c.Schema, c.Table); ne != nil {
		return nameError(ne)
	}
	return nil
}

// Outcome says what a barrier call did.
type Outcome int

// The outcomes of a barrier call.
const (
	// Ran: fn ran (and the caller's transaction carries its effect).
	Ran Outcome = iota
	// Duplicate: this op already ran for this key; fn was skipped.
	Duplicate
	// NullCompensation: a compensation of an action that never ran; fn was skipped
	// and the action is now blocked.
	NullCompensation
	// Hanging: an action that arrived after its compensation; fn was skipped.
	Hanging
)

// String returns ran, duplicate, null_compensation or hanging.
func (o Outcome) String() string {
	switch o {
	case Ran:
		return "ran"
	case Duplicate:
		return "duplicate"
	case NullCompensation:
		return "null_compensation"
	case Hanging:
		return "hanging"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// NewBarrier validates cfg and returns a Barrier on its table. An invalid name is
// a *ConfigError (ErrInvalidConfig). It does not touch the database (see Migrate).
func NewBarrier(cfg BarrierConfig) (*Barrier, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	schema, err := barrierComponent(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	t := pgschema.Qualified(cfg.Schema, cfg.Table)
	return &Barrier{
		schema: schema,
		ins:    `INSERT INTO ` + t + ` (saga_id, step, op, reason) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		reason: `SELECT reason FROM ` + t + ` WHERE saga_id = $1 AND step = $2 AND op = 'action'`,
	}, nil
}

// ParseKey splits an idempotency key "<saga id>/<step>" (StepContext.IdempotencyKey).
// An invalid key returns an error matching ErrBarrierKey.
func ParseKey(key string) (sagaID, step string, err error) {
	sagaID, step, ok := strings.Cut(key, "/")
	if !ok || coord.ValidateName("saga id", sagaID, coord.MaxNameLen) != nil ||
		coord.ValidateName("step", step, coord.MaxNameLen) != nil {
		return "", "", fmt.Errorf("%w: %q", ErrBarrierKey, pgtext.Clean(key, 64))
	}
	return sagaID, step, nil
}

// ActionTx runs fn in tx unless the action with this key already ran or was
// compensated. It blocks for one statement plus fn; ctx cancels it. When fn
// returns an error, ActionTx returns it and the caller must roll tx back (the
// barrier row is in tx too, so nothing is recorded).
func (b *Barrier) ActionTx(ctx context.Context, tx pgx.Tx, key string, fn func(ctx context.Context, tx pgx.Tx) error) (Outcome, error) {
	id, step, err := ParseKey(key)
	if err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, b.ins, id, step, "action", "action")
	if err != nil {
		return 0, fmt.Errorf("saga: barrier: %w", err)
	}
	if tag.RowsAffected() == 0 {
		var reason string
		if err := tx.QueryRow(ctx, b.reason, id, step).Scan(&reason); err != nil {
			return 0, fmt.Errorf("saga: barrier: %w", err)
		}
		if reason == "compensate" {
			return Hanging, nil
		}
		return Duplicate, nil
	}
	return Ran, fn(ctx, tx)
}

// CompensateTx runs fn in tx unless this compensation already ran, or the action
// never ran (then it blocks the action from ever running). It blocks for two
// statements plus fn; ctx cancels it. When fn returns an error, CompensateTx
// returns it and the caller must roll tx back.
func (b *Barrier) CompensateTx(ctx context.Context, tx pgx.Tx, key string, fn func(ctx context.Context, tx pgx.Tx) error) (Outcome, error) {
	id, step, err := ParseKey(key)
	if err != nil {
		return 0, err
	}
	// Take the action's slot first: if we get it, the action never ran.
	tag, err := tx.Exec(ctx, b.ins, id, step, "action", "compensate")
	if err != nil {
		return 0, fmt.Errorf("saga: barrier: %w", err)
	}
	nullComp := tag.RowsAffected() == 1
	tag, err = tx.Exec(ctx, b.ins, id, step, "compensate", "compensate")
	if err != nil {
		return 0, fmt.Errorf("saga: barrier: %w", err)
	}
	switch {
	case tag.RowsAffected() == 0:
		return Duplicate, nil
	case nullComp:
		return NullCompensation, nil
	}
	return Ran, fn(ctx, tx)
}
