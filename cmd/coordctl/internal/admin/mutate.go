package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// Request is who asks for a mutation, why, and on which state.
type Request struct {
	Actor  string // who: a person or a tool's identity
	Via    string // "cli", or "console" and the client's address
	Reason string // why: recorded in the audit row
	// Expect is the Version of the state the operator was shown; the mutation
	// happens only if the object still has it. "" acts on the current state (the
	// CLI reads it, shows it and passes its version).
	Expect string
	// DryRun does everything in a transaction that is rolled back: it reports
	// what would change, writes no audit row and changes nothing.
	DryRun bool
}

// Change is what a mutation did (or, with DryRun, would do).
type Change struct {
	Action  string    `json:"action"`
	Target  string    `json:"target"`
	DryRun  bool      `json:"dry_run"`
	Before  any       `json:"before"`
	After   any       `json:"after"`
	AuditID int64     `json:"audit_id,omitempty"` // 0 for a dry run
	At      time.Time `json:"at,omitzero"`
}

// ErrConflict matches every *ConflictError.
var ErrConflict = errors.New("coordctl: the state changed since it was shown")

// ConflictError is a mutation refused because the object's state is no longer
// the one the operator was shown (a runner moved the saga on, someone else
// requeued the event): nothing changed; look again and decide again. The refusal
// is in the audit table too (outcome "conflict").
type ConflictError struct {
	Action, Target   string
	Expected, Actual string // versions
	Current          any    // the state now (nil: the object is gone)
	AuditID          int64
}

// Error says what moved.
func (e *ConflictError) Error() string {
	if e.Current == nil {
		return fmt.Sprintf("coordctl: %s of %s refused: it is gone (someone else acted on it since it was shown); nothing changed", e.Action, e.Target)
	}
	return fmt.Sprintf("coordctl: %s of %s refused: its state changed since it was shown (version %s, now %s); nothing changed — look again",
		e.Action, e.Target, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// op is one kind of mutation.
type op struct {
	action, target string
	// lock reads the object in tx, locking it until tx ends, and returns it with
	// its version. gone reports "not there" (a conflict when a version was expected).
	lock func(ctx context.Context, tx pgx.Tx) (state any, version string, err error)
	// gone reports whether an error of lock means the object does not exist.
	gone func(error) bool
	// apply changes it; after reads the result.
	apply func(ctx context.Context, tx pgx.Tx, before any) error
	after func(ctx context.Context, tx pgx.Tx) (any, error)
}

// begin checks req's actor and reason and begins the transaction of a change
// (action on target, for the error); unless req is a dry run, the audit table
// must be ready first.
func (a *Admin) begin(ctx context.Context, req Request, action, target string) (pgx.Tx, error) {
	if err := audit.CheckActor(req.Actor); err != nil {
		return nil, err
	}
	if err := audit.CheckReason(req.Reason); err != nil {
		return nil, err
	}
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	if !req.DryRun {
		if err := a.trail.Ready(ctx, pool); err != nil {
			return nil, err
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("coordctl: %s %s: begin: %w", action, target, err)
	}
	return tx, nil
}

// mutate is the one way coordctl changes anything: check the request, begin,
// lock and read the object, compare its version with the one shown, apply, read
// the result, record the audit row, commit, log. A dry run rolls back instead of
// recording and committing.
func (a *Admin) mutate(ctx context.Context, o op, req Request) (Change, error) {
	tx, err := a.begin(ctx, req, o.action, o.target)
	if err != nil {
		return Change{}, err
	}
	defer pgtx.Rollback(ctx, tx)

	before, version, err := o.lock(ctx, tx)
	switch {
	case err != nil && o.gone(err) && req.Expect != "":
		return Change{}, a.conflict(ctx, o, req, nil, "")
	case err != nil:
		return Change{}, err
	case req.Expect != "" && req.Expect != version:
		return Change{}, a.conflict(ctx, o, req, before, version)
	}
	if err := o.apply(ctx, tx, before); err != nil {
		var ce *ConflictError // the object's own compare-and-set refused (pgfence's reset)
		if errors.As(err, &ce) {
			return Change{}, a.conflict(ctx, o, req, ce.Current, ce.Actual)
		}
		return Change{}, err
	}
	after, err := o.after(ctx, tx)
	if err != nil {
		return Change{}, err
	}
	ch := Change{Action: o.action, Target: o.target, DryRun: req.DryRun, Before: before, After: after}
	if req.DryRun {
		return ch, nil // the deferred rollback undoes apply
	}
	e := audit.Entry{Actor: req.Actor, Via: req.Via, Action: o.action, Target: o.target, Reason: req.Reason, Outcome: audit.Applied}
	if ch.AuditID, ch.At, err = a.trail.Record(ctx, tx, e, before, after); err != nil {
		return Change{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Change{}, fmt.Errorf("coordctl: %s %s: commit (outcome unknown: see the audit table): %w", o.action, o.target, err)
	}
	a.log.InfoContext(ctx, "coordctl: "+o.action, "target", o.target, "actor", req.Actor, "via", req.Via,
		"reason", req.Reason, "audit_id", ch.AuditID)
	return ch, nil
}

// conflict records and logs a refused mutation, in a transaction of its own
// (the mutation's rolls back), and returns its *ConflictError.
func (a *Admin) conflict(ctx context.Context, o op, req Request, current any, version string) error {
	ce := &ConflictError{Action: o.action, Target: o.target, Expected: req.Expect, Actual: version, Current: current}
	a.log.WarnContext(ctx, "coordctl: "+o.action+" refused: the state changed since it was shown", "target", o.target,
		"actor", req.Actor, "via", req.Via, "expected", req.Expect, "actual", version)
	if req.DryRun {
		return ce
	}
	pool, err := a.db(ctx)
	if err != nil {
		return ce
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		e := audit.Entry{Actor: req.Actor, Via: req.Via, Action: o.action, Target: o.target, Reason: req.Reason, Outcome: audit.Conflict}
		ce.AuditID, _, err = a.trail.Record(ctx, tx, e, map[string]string{"expected_version": req.Expect}, current)
		return err
	})
	if err != nil {
		a.log.ErrorContext(ctx, "coordctl: could not record a refused mutation in the audit table", "action", o.action, "target", o.target, "err", err)
	}
	return ce
}
