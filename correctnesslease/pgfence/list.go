package pgfence

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Querier is DBTX.
//
// Deprecated: use DBTX.
type Querier = DBTX

// Row is one lease's fence: the highest token revision it has presented.
type Row struct {
	Lease     string
	Revision  int64
	UpdatedAt time.Time // when Revision was last recorded
}

// Default and bound of ListOpts.Limit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

// FenceListOpts filters FenceList. A nil *FenceListOpts lists the first
// DefaultListLimit rows.
type FenceListOpts struct {
	// Prefix keeps the leases starting with it ("/tenants/acme/"). Default: all.
	Prefix string
	// After starts the page after this lease (the last Row.Lease of the previous
	// page: keyset pagination). Default "": the first page.
	After string
	// Limit is at most how many rows to return, in lease order. Default
	// DefaultListLimit; at most MaxListLimit.
	Limit int
}

// ListOpts filters List.
//
// Deprecated: use FenceListOpts with FenceList.
type ListOpts = FenceListOpts

// FenceList returns the fence table's rows in lease order: the operator's view
// (coordctl fences list). It is read-only and takes no lock; one query, which ctx
// cancels. A negative or too large Limit is a *ConfigError.
func (f *Fence) FenceList(ctx context.Context, db DBTX, opts *FenceListOpts) ([]Row, error) {
	var o FenceListOpts
	if opts != nil {
		o = *opts
	}
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 0 || o.Limit > MaxListLimit {
		return nil, &ConfigError{Field: "FenceListOpts.Limit", Reason: fmt.Sprintf("%d outside [1, %d]", o.Limit, MaxListLimit)}
	}
	rows, err := db.Query(ctx, "SELECT lease, revision, updated_at FROM "+f.table+
		" WHERE starts_with(lease, $1) AND lease > $2 ORDER BY lease LIMIT $3", o.Prefix, o.After, o.Limit)
	if err != nil {
		return nil, fmt.Errorf("pgfence: list: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Row, error) {
		var x Row
		return x, r.Scan(&x.Lease, &x.Revision, &x.UpdatedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("pgfence: list: %w", err)
	}
	return out, nil
}

// List is FenceList.
//
// Deprecated: use FenceList.
func (f *Fence) List(ctx context.Context, db DBTX, opts *ListOpts) ([]Row, error) {
	return f.FenceList(ctx, db, opts)
}

// FenceGet returns one lease's fence row, or an error matching ErrNotFound when
// the lease has never presented a token (any token is then accepted). It does
// not lock: one query, which ctx cancels.
func (f *Fence) FenceGet(ctx context.Context, db DBTX, lease string) (Row, error) {
	var r Row
	err := db.QueryRow(ctx, "SELECT lease, revision, updated_at FROM "+f.table+" WHERE lease = $1", lease).
		Scan(&r.Lease, &r.Revision, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, fmt.Errorf("%w: no fence row for %q", ErrNotFound, lease)
	}
	if err != nil {
		return Row{}, fmt.Errorf("pgfence: read fence of %q: %w", lease, err)
	}
	return r, nil
}

// Get returns one lease's fence row; ok is false when the lease has never
// presented a token. It does not lock.
//
// Deprecated: use FenceGet, whose missing row is an error matching ErrNotFound.
func (f *Fence) Get(ctx context.Context, db DBTX, lease string) (r Row, ok bool, err error) {
	r, err = f.FenceGet(ctx, db, lease)
	if errors.Is(err, ErrNotFound) {
		return Row{}, false, nil
	}
	return r, err == nil, err
}

// ResetListOpts bounds ResetList. A nil *ResetListOpts lists the last
// DefaultListLimit resets.
type ResetListOpts struct {
	// Limit is at most how many resets to return, newest first. Default
	// DefaultListLimit; at most MaxListLimit.
	Limit int
}

// Resets returns up to limit (1..MaxListLimit) audited resets of lease's fence
// row, newest first. It is read-only.
//
// Deprecated: use ResetList.
func (f *Fence) Resets(ctx context.Context, db DBTX, lease string, limit int) ([]ResetResult, error) {
	if limit < 1 {
		return nil, &ConfigError{Field: "limit", Reason: fmt.Sprintf("%d outside [1, %d]", limit, MaxListLimit)}
	}
	return f.ResetList(ctx, db, lease, &ResetListOpts{Limit: limit})
}

// ResetList returns the audited resets of lease's fence row, newest first, as
// FenceReset recorded them. It is read-only: one query, which ctx cancels. A bad
// Limit is a *ConfigError.
func (f *Fence) ResetList(ctx context.Context, db DBTX, lease string, opts *ResetListOpts) ([]ResetResult, error) {
	limit := DefaultListLimit
	if opts != nil && opts.Limit != 0 {
		limit = opts.Limit
	}
	if limit < 1 || limit > MaxListLimit {
		return nil, &ConfigError{Field: "ResetListOpts.Limit", Reason: fmt.Sprintf("%d outside [1, %d]", limit, MaxListLimit)}
	}
	rows, err := db.Query(ctx, "SELECT id, lease, actor, reason, revision_before, revision_after, reset_at FROM "+f.audit+
		" WHERE lease = $1 ORDER BY id DESC LIMIT $2", lease, limit)
	if err != nil {
		return nil, fmt.Errorf("pgfence: resets of %q: %w", lease, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ResetResult, error) {
		var x ResetResult
		return x, r.Scan(&x.AuditID, &x.Lease, &x.Actor, &x.Reason, &x.Before, &x.After, &x.At)
	})
	if err != nil {
		return nil, fmt.Errorf("pgfence: resets of %q: %w", lease, err)
	}
	return out, nil
}
