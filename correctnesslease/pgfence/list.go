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

// ListOpts filters List. A nil *ListOpts lists the first DefaultListLimit rows.
type ListOpts struct {
	// Prefix keeps the leases starting with it ("/tenants/acme/"). Default: all.
	Prefix string
	// Limit is at most how many rows to return, in lease order. Default
	// DefaultListLimit; at most MaxListLimit.
	Limit int
}

// List returns the fence table's rows in lease order: the operator's view
// (coordctl fences list). It is read-only and takes no lock; one query, which ctx
// cancels. A negative or too large Limit is a *ConfigError.
func (f *Fence) List(ctx context.Context, db DBTX, opts *ListOpts) ([]Row, error) {
	var o ListOpts
	if opts != nil {
		o = *opts
	}
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 0 || o.Limit > MaxListLimit {
		return nil, &ConfigError{Field: "ListOpts.Limit", Reason: fmt.Sprintf("%d outside [1, %d]", o.Limit, MaxListLimit)}
	}
	rows, err := db.Query(ctx, "SELECT lease, revision, updated_at FROM "+f.table+
		" WHERE starts_with(lease, $1) ORDER BY lease LIMIT $2", o.Prefix, o.Limit)
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

// Get returns one lease's fence row; ok is false when the lease has never
// presented a token. It does not lock.
func (f *Fence) Get(ctx context.Context, db DBTX, lease string) (r Row, ok bool, err error) {
	err = db.QueryRow(ctx, "SELECT lease, revision, updated_at FROM "+f.table+" WHERE lease = $1", lease).
		Scan(&r.Lease, &r.Revision, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, fmt.Errorf("pgfence: read fence of %q: %w", lease, err)
	}
	return r, true, nil
}

// Resets returns up to limit (1..MaxListLimit) audited resets of lease's fence
// row, newest first, as ResetFence recorded them. It is read-only.
func (f *Fence) Resets(ctx context.Context, db DBTX, lease string, limit int) ([]ResetResult, error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, &ConfigError{Field: "limit", Reason: fmt.Sprintf("%d outside [1, %d]", limit, MaxListLimit)}
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
