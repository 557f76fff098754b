package pgfence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtx"
)

// Bounds of the text FenceReset records.
const (
	MaxResetActorBytes  = 256
	MaxResetReasonBytes = 1024
)

// ResetOpts says who resets a fence row, why, and from which value to which.
type ResetOpts struct {
	// Actor is who asks for the reset (a person or a tool's identity). Required:
	// 1 to MaxResetActorBytes bytes of valid UTF-8 without control characters.
	Actor string
	// Reason says why (an incident id, "etcd restored without --bump-revision").
	// Required: 1 to MaxResetReasonBytes bytes of valid UTF-8; newlines and tabs
	// are the only control characters allowed.
	Reason string
	// ExpectHighest is the revision the operator saw recorded for the lease
	// (Fence.Highest; 0: no row). The reset happens only if it is still the
	// recorded one, so it never clobbers a write that raced the decision.
	ExpectHighest int64
	// To is the revision to record instead; 0 deletes the row, so that the next
	// token of the lease, whatever its revision, is accepted. Must differ from
	// ExpectHighest and not be negative.
	To int64
}

// ResetResult is what FenceReset did, as recorded in the audit table.
type ResetResult struct {
	Lease   string
	Before  int64 // the recorded revision before the reset (0: no row)
	After   int64 // the recorded revision after it (0: no row)
	Actor   string
	Reason  string
	AuditID int64     // the audit row's id
	At      time.Time // when the database recorded it
}

// ErrResetConflict matches every *ResetConflictError.
var ErrResetConflict = errors.New("pgfence: fence changed since it was read")

// ResetConflictError is FenceReset's refusal to overwrite a fence row that no
// longer holds ResetOpts.ExpectHighest: a holder wrote (or another reset ran)
// after the operator looked. Nothing was changed; read again and decide again.
type ResetConflictError struct {
	Lease    string
	Expected int64 // ResetOpts.ExpectHighest
	Actual   int64 // what the row holds now (0: no row)
}

// Error names the lease and the expected and actual revisions.
func (e *ResetConflictError) Error() string {
	return fmt.Sprintf("pgfence: reset of the fence of %q refused: expected revision %d, the row holds %d", e.Lease, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrResetConflict) true.
func (e *ResetConflictError) Is(target error) bool { return target == ErrResetConflict }

// FenceReset is the operator's way out when a lease's fence row holds a revision
// no real holder can exceed — a forged token (tokens are not authenticated: see
// the threat model in docs/pgfence.md), or an etcd restored without
// --bump-revision. In one transaction it compares the recorded revision with
// opts.ExpectHighest and, only if they are equal, records opts.To instead (0
// deletes the row), and writes who, why, when, before and after to the audit
// table (Config.Table + "_audit"); it then logs the reset at WARN. Do it only when
// no holder that wrote the old revision can still be writing: lowering a fence
// re-admits every token above the new value.
//
// It blocks while a fenced transaction of the lease is open (a frozen one ends
// within IdleTimeout) and honours ctx. It returns what it did, or: a
// *ResetConflictError (ErrResetConflict) when the row no longer holds
// ExpectHighest — nothing changed; a *ConfigError (ErrInvalidConfig) for an
// invalid lease name or ResetOpts — nothing written; an error matching
// ErrCommitUnknown when the connection failed during COMMIT (read the audit
// table); or the database's error.
func (f *Fence) FenceReset(ctx context.Context, db Beginner, lease string, opts ResetOpts) (ResetResult, error) {
	if err := validReset(lease, opts); err != nil {
		return ResetResult{}, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return ResetResult{}, fmt.Errorf("pgfence: reset: begin: %w", err)
	}
	defer pgtx.Rollback(ctx, tx) // after Commit: a no-op
	var tag interface{ RowsAffected() int64 }
	switch {
	case opts.ExpectHighest == 0:
		tag, err = tx.Exec(ctx, "INSERT INTO "+f.table+" (lease, revision) VALUES ($1, $2) ON CONFLICT (lease) DO NOTHING", lease, opts.To)
	case opts.To == 0:
		tag, err = tx.Exec(ctx, "DELETE FROM "+f.table+" WHERE lease = $1 AND revision = $2", lease, opts.ExpectHighest)
	default:
		tag, err = tx.Exec(ctx, "UPDATE "+f.table+" SET revision = $3, updated_at = now() WHERE lease = $1 AND revision = $2", lease, opts.ExpectHighest, opts.To)
	}
	if err != nil {
		return ResetResult{}, fmt.Errorf("pgfence: reset the fence of %q: %w", lease, err)
	}
	if tag.RowsAffected() != 1 {
		actual, err := f.Highest(ctx, tx, lease)
		if err != nil {
			return ResetResult{}, err
		}
		return ResetResult{}, &ResetConflictError{Lease: lease, Expected: opts.ExpectHighest, Actual: actual}
	}
	r := ResetResult{Lease: lease, Before: opts.ExpectHighest, After: opts.To, Actor: opts.Actor, Reason: opts.Reason}
	if err := tx.QueryRow(ctx, "INSERT INTO "+f.audit+" (lease, actor, reason, revision_before, revision_after) "+
		"VALUES ($1, $2, $3, $4, $5) RETURNING id, reset_at", lease, opts.Actor, opts.Reason, r.Before, r.After).Scan(&r.AuditID, &r.At); err != nil {
		return ResetResult{}, fmt.Errorf("pgfence: reset the fence of %q: audit: %w", lease, err)
	}
	if err := commit(ctx, tx, "reset of the fence of "+lease); err != nil {
		return ResetResult{}, err
	}
	f.log().WarnContext(ctx, "pgfence: fence row reset by an operator",
		slog.String(coord.AttrLease, lease), slog.String("actor", opts.Actor), slog.String("reason", opts.Reason),
		slog.Int64("before", r.Before), slog.Int64("after", r.After), slog.Int64("audit_id", r.AuditID))
	return r, nil
}

// ResetFence is FenceReset.
//
// Deprecated: use FenceReset.
func (f *Fence) ResetFence(ctx context.Context, db Beginner, lease string, opts ResetOpts) (ResetResult, error) {
	return f.FenceReset(ctx, db, lease, opts)
}

// validReset checks FenceReset's input: every string it writes is storable and
// bounded, and the revisions make sense.
func validReset(lease string, o ResetOpts) error {
	if err := coord.ValidateLease(lease); err != nil {
		return &ConfigError{Field: "lease", Reason: err.Error(), Err: err}
	}
	if err := checkText(o.Actor, MaxResetActorBytes, false); err != "" {
		return &ConfigError{Field: "ResetOpts.Actor", Reason: err}
	}
	if err := checkText(o.Reason, MaxResetReasonBytes, true); err != "" {
		return &ConfigError{Field: "ResetOpts.Reason", Reason: err}
	}
	switch {
	case o.ExpectHighest < 0:
		return &ConfigError{Field: "ResetOpts.ExpectHighest", Reason: "negative"}
	case o.To < 0:
		return &ConfigError{Field: "ResetOpts.To", Reason: "negative"}
	case o.To == o.ExpectHighest:
		return &ConfigError{Field: "ResetOpts.To", Reason: "equals ExpectHighest: nothing to reset"}
	}
	return nil
}

// checkText says what is wrong with s as a recorded text field, or "".
func checkText(s string, maxBytes int, multiline bool) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > maxBytes:
		return fmt.Sprintf("%d bytes, over the limit of %d", len(s), maxBytes)
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	for _, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("control character %U", r)
		}
	}
	return ""
}
