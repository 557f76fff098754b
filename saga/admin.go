package saga

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// Info is a saga as the admin API shows it.
type Info struct {
	ID            string    // the saga id
	Type          string    // the definition's name
	State         State     // current state
	Step          int       // running: next step to run; compensating: next step to undo
	PivotStep     int       // index of the pivot
	StepCount     int       // steps in the definition
	Attempts      int       // failed attempts of the current step or compensation
	NextAttemptAt time.Time // when the saga is next due
	LastError     string
	Failure       string                     // the business failure (or cancel) that started compensation
	Data          json.RawMessage            // the saga data, as committed
	Outputs       map[string]json.RawMessage // step name -> output
	CreatedAt     time.Time                  // when it was started
	UpdatedAt     time.Time                  // last write
	StateSince    time.Time                  // when it entered its current state
	PivotAt       *time.Time                 // when the pivot committed; nil before
	ClaimOwner    *string                    // runner holding (or last holding an unreleased) claim
	ClaimVersion  int64                      // the fence: bumped by every claim
	Errors        []ErrorRecord              // the last 20 recorded errors, oldest first
	// StepNames are the definition's step names in order, as recorded when the
	// saga started (schema version 2); empty for sagas started before.
	StepNames []string
}

// ErrorRecord is one error in a saga's history: a failed attempt of a step or
// compensation, a business failure, a cancel or a resolution (Step "").
type ErrorRecord struct {
	At    time.Time `json:"at"`
	Step  string    `json:"step"`
	Error string    `json:"error"`
}

// Age returns how long the saga has been in its current state, as of now.
func (i Info) Age(now time.Time) time.Duration { return now.Sub(i.StateSince) }

func scanInfo(row pgx.Row) (Info, error) {
	var i Info
	var state string
	err := row.Scan(&i.ID, &i.Type, &state, &i.Step, &i.PivotStep, &i.StepCount, &i.Attempts, &i.NextAttemptAt,
		&i.LastError, &i.Failure, &i.Data, &i.Outputs, &i.CreatedAt, &i.UpdatedAt, &i.StateSince, &i.PivotAt,
		&i.ClaimOwner, &i.ClaimVersion, &i.Errors, &i.StepNames)
	i.State = State(state)
	return i, err
}

// SagaGet returns one saga, or an error matching ErrNotFound. It is read-only:
// one query, which ctx cancels.
func (c *Client) SagaGet(ctx context.Context, id string) (Info, error) {
	return c.get(ctx, c.pool.QueryRow(ctx, c.q.get, id), id)
}

// Get returns one saga, or an error matching ErrNotFound.
//
// Deprecated: use SagaGet.
func (c *Client) Get(ctx context.Context, id string) (Info, error) { return c.SagaGet(ctx, id) }

// SagaLockTx returns one saga, as SagaGet does (ErrNotFound when there is none), and locks its row until tx ends: a
// runner's next write of it and every admin call on it wait, so that a SagaRetryTx,
// SagaResolveTx or SagaCancelTx later in tx acts on exactly the state it returned (an
// operator's compare-and-set: coordctl compares it with what it showed). Runners
// looking for due sagas skip the row. It blocks while another transaction holds
// the row; ctx cancels the wait.
func (c *Client) SagaLockTx(ctx context.Context, tx pgx.Tx, id string) (Info, error) {
	return c.get(ctx, tx.QueryRow(ctx, c.q.get+" FOR UPDATE", id), id)
}

// LockTx is SagaLockTx.
//
// Deprecated: use SagaLockTx.
func (c *Client) LockTx(ctx context.Context, tx pgx.Tx, id string) (Info, error) {
	return c.SagaLockTx(ctx, tx, id)
}

func (c *Client) get(_ context.Context, row pgx.Row, id string) (Info, error) {
	i, err := scanInfo(row)
	if err == pgx.ErrNoRows {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return Info{}, fmt.Errorf("saga: get %q: %w", id, err)
	}
	return i, nil
}

// SagaRetry makes a running or compensating saga due now (skipping its backoff)
// and wakes the runners. A saga a runner is driving right now is left to it. It
// returns ErrNotFound or *StateError (ErrWrongState) for other sagas.
func (c *Client) SagaRetry(ctx context.Context, id string) error {
	return c.inTx(ctx, id, func(tx pgx.Tx) error { return c.SagaRetryTx(ctx, tx, id) })
}

// RetryNow is SagaRetry.
//
// Deprecated: use SagaRetry.
func (c *Client) RetryNow(ctx context.Context, id string) error { return c.SagaRetry(ctx, id) }

// RetryNowTx is SagaRetryTx.
//
// Deprecated: use SagaRetryTx.
func (c *Client) RetryNowTx(ctx context.Context, tx pgx.Tx, id string) error {
	return c.SagaRetryTx(ctx, tx, id)
}

// SagaRetryTx is SagaRetry in the caller's transaction: the saga is due (and the
// runners are woken) once tx commits. On error, roll tx back.
func (c *Client) SagaRetryTx(ctx context.Context, tx pgx.Tx, id string) error {
	var got string
	err := tx.QueryRow(ctx, c.q.retryNow, id, c.q.channel).Scan(&got)
	if err == pgx.ErrNoRows {
		i, gerr := c.get(ctx, tx.QueryRow(ctx, c.q.get, id), id)
		if gerr != nil {
			return gerr
		}
		return &StateError{ID: id, State: i.State, Want: "retry needs running or compensating"}
	}
	if err != nil {
		return fmt.Errorf("saga: retry %q: %w", id, err)
	}
	return nil
}

// Resolution is how a human resolves a needs_human saga.
type Resolution string

// The resolutions.
const (
	// ResolveCompensated: the human finished undoing the saga by hand; it becomes
	// compensated (terminal).
	ResolveCompensated Resolution = "compensated"
	// ResolveRetry: the cause is fixed; retry the failed compensation with a fresh
	// budget of Config.CompensationAttempts.
	ResolveRetry Resolution = "retry"
	// ResolveSkip: the human undid the failed step by hand; continue compensating
	// the steps before it.
	ResolveSkip Resolution = "skip"
)

// SagaResolve takes a needs_human saga out of that state as how says, recording note
// (required, at most 1000 bytes of UTF-8 without NUL) in its error history, and wakes the
// runners. It blocks for one transaction; ctx cancels it. Errors: ErrNotFound,
// *StateError (not needs_human), ErrInvalidConfig (bad resolution or note).
func (c *Client) SagaResolve(ctx context.Context, id string, how Resolution, note string) error {
	if err := checkNote(note); err != nil {
		return err // before any round trip
	}
	return c.inTx(ctx, id, func(tx pgx.Tx) error { return c.SagaResolveTx(ctx, tx, id, how, note) })
}

// Resolve is SagaResolve.
//
// Deprecated: use SagaResolve.
func (c *Client) Resolve(ctx context.Context, id string, how Resolution, note string) error {
	return c.SagaResolve(ctx, id, how, note)
}

// ResolveTx is SagaResolveTx.
//
// Deprecated: use SagaResolveTx.
func (c *Client) ResolveTx(ctx context.Context, tx pgx.Tx, id string, how Resolution, note string) error {
	return c.SagaResolveTx(ctx, tx, id, how, note)
}

// SagaResolveTx is SagaResolve in the caller's transaction: the resolution takes
// effect (and the runners are woken) once tx commits. On error, roll tx back.
func (c *Client) SagaResolveTx(ctx context.Context, tx pgx.Tx, id string, how Resolution, note string) error {
	if err := checkNote(note); err != nil {
		return err
	}
	return c.adminTx(ctx, tx, id, func(r rowState) error {
		if r.state != StateNeedsHuman {
			return &StateError{ID: id, State: r.state, Want: "resolve needs needs_human"}
		}
		state, step := StateCompensating, r.step
		switch how {
		case ResolveCompensated:
			state = StateCompensated
		case ResolveRetry:
			if step >= r.pivot || step < 0 {
				state = StateRunning // stuck for a definition mismatch: drive it again
			}
		case ResolveSkip:
			if step >= r.pivot {
				return fmt.Errorf("%w: saga %q is parked at step %d, pivot is %d: nothing to skip", ErrPastPivot, id, step, r.pivot)
			}
			step--
			if step < 0 {
				state = StateCompensated
			}
		default:
			return fmt.Errorf("%w: unknown resolution %q", ErrInvalidConfig, how)
		}
		_, err := tx.Exec(ctx, c.q.cancel, id, string(state), step, "resolved ("+string(how)+"): "+note)
		return err
	})
}

// SagaCancel stops a running saga that has not reached its pivot and compensates what
// it did: the current step (unless the saga was never claimed: an attempt may have
// reached the participant unrecorded) and every step before it, newest first. A
// runner driving it is fenced off (claim_version). It returns ErrPastPivot when
// the saga has reached its pivot — after that only forward is possible —
// *StateError when it is terminal, needs a human or already
// compensates, and ErrNotFound. reason (at most 1000 bytes of UTF-8 without NUL) is recorded.
func (c *Client) SagaCancel(ctx context.Context, id string, reason string) error {
	if err := checkReason(reason); err != nil {
		return err // before any round trip
	}
	return c.inTx(ctx, id, func(tx pgx.Tx) error { return c.SagaCancelTx(ctx, tx, id, reason) })
}

// Cancel is SagaCancel.
//
// Deprecated: use SagaCancel.
func (c *Client) Cancel(ctx context.Context, id string, reason string) error {
	return c.SagaCancel(ctx, id, reason)
}

// CancelTx is SagaCancelTx.
//
// Deprecated: use SagaCancelTx.
func (c *Client) CancelTx(ctx context.Context, tx pgx.Tx, id string, reason string) error {
	return c.SagaCancelTx(ctx, tx, id, reason)
}

// SagaCancelTx is SagaCancel in the caller's transaction: the saga compensates
// (and the runners are woken) once tx commits. On error, roll tx back.
func (c *Client) SagaCancelTx(ctx context.Context, tx pgx.Tx, id string, reason string) error {
	if err := checkReason(reason); err != nil {
		return err
	}
	return c.adminTx(ctx, tx, id, func(r rowState) error {
		if r.state != StateRunning {
			return &StateError{ID: id, State: r.state, Want: "cancel needs running"}
		}
		// Entering the pivot is the runner's committed write of step = pivot; a
		// saga never claimed has not entered anything.
		notStarted := r.version == 0
		if r.step >= r.pivot && !notStarted {
			return fmt.Errorf("%w: saga %q is at step %d, pivot is %d", ErrPastPivot, id, r.step, r.pivot)
		}
		// A runner that stopped mid-call released its claim without recording the
		// attempt, yet the participant may have applied it: unless the saga was never
		// claimed, compensate the current step too (the barrier makes it a no-op if
		// the action never ran).
		from := r.step
		if notStarted { // the current step was never tried
			from--
		}
		if from >= r.pivot {
			from = r.pivot - 1
		}
		state := StateCompensating
		if from < 0 {
			state = StateCompensated
		}
		_, err := tx.Exec(ctx, c.q.cancel, id, string(state), from, "cancelled: "+reason)
		return err
	})
}

type rowState struct {
	state                 State
	step, pivot, attempts int
	claimed               bool
	version               int64
}

// checkNote and checkReason refuse what the errors column cannot store as given
// (pgtext.Clean would change it: invalid UTF-8, NUL, over 1000 bytes).
func checkNote(note string) error {
	if note == "" || pgtext.Clean(note, 1000) != note {
		return fmt.Errorf("%w: resolve note must be 1 to 1000 bytes of UTF-8 without NUL", ErrInvalidConfig)
	}
	return nil
}

func checkReason(reason string) error {
	if pgtext.Clean(reason, 1000) != reason {
		return fmt.Errorf("%w: cancel reason must be at most 1000 bytes of UTF-8 without NUL", ErrInvalidConfig)
	}
	return nil
}

// inTx runs fn in a transaction of its own and commits it.
func (c *Client) inTx(ctx context.Context, id string, fn func(pgx.Tx) error) error {
	tx, err := c.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("saga: admin %q: %w", id, err)
	}
	defer pgtx.Rollback(ctx, tx)
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("saga: admin %q: %w", id, err)
	}
	return nil
}

// adminTx locks the saga's row in tx, runs fn on what it holds, and notifies the
// runners (at commit).
func (c *Client) adminTx(ctx context.Context, tx pgx.Tx, id string, fn func(rowState) error) error {
	var r rowState
	var state string
	err := tx.QueryRow(ctx, c.q.lockRow, id).Scan(&state, &r.step, &r.pivot, &r.attempts, &r.claimed, &r.version)
	if err == pgx.ErrNoRows {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil {
		return fmt.Errorf("saga: admin %q: %w", id, err)
	}
	r.state = State(state)
	if err := fn(r); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", c.q.channel, id); err != nil {
		return fmt.Errorf("saga: admin %q: %w", id, err)
	}
	return nil
}
