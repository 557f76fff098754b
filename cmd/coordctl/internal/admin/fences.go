package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
)

// Fence is one lease's fence row.
type Fence struct {
	Lease     string    `json:"lease"`
	Highest   int64     `json:"highest"` // 0: no row (any token is accepted)
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Version is the highest revision as text: --expect for a reset.
	Version string       `json:"version"`
	Resets  []FenceReset `json:"resets,omitempty"`
}

// FenceReset is one audited reset of a fence row (pgfence's own audit table).
type FenceReset struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Before int64     `json:"before"`
	After  int64     `json:"after"`
}

// Fences lists fence rows whose lease starts with prefix, in lease order.
func (a *Admin) Fences(ctx context.Context, prefix string, limit int) ([]Fence, error) {
	return a.FencesAfter(ctx, prefix, "", limit)
}

// FencesAfter is Fences from the lease after after (keyset: the last lease
// of the previous page).
func (a *Admin) FencesAfter(ctx context.Context, prefix, after string, limit int) ([]Fence, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := a.fence.FenceList(ctx, pool, &pgfence.FenceListOpts{Prefix: prefix, After: after, Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]Fence, 0, len(rows))
	for _, r := range rows {
		out = append(out, Fence{Lease: r.Lease, Highest: r.Revision, UpdatedAt: r.UpdatedAt, Version: strconv.FormatInt(r.Revision, 10)})
	}
	return out, nil
}

// Fence returns one lease's fence row and its last 20 resets.
func (a *Admin) Fence(ctx context.Context, lease string) (Fence, error) {
	if err := checkLease(lease); err != nil {
		return Fence{}, err
	}
	pool, err := a.db(ctx)
	if err != nil {
		return Fence{}, err
	}
	f, err := a.readFence(ctx, pool, lease)
	if err != nil {
		return Fence{}, err
	}
	resets, err := a.fence.ResetList(ctx, pool, lease, &pgfence.ResetListOpts{Limit: 20})
	if err != nil {
		return Fence{}, err
	}
	for _, r := range resets {
		f.Resets = append(f.Resets, FenceReset{ID: r.AuditID, At: r.At, Actor: r.Actor, Reason: r.Reason, Before: r.Before, After: r.After})
	}
	return f, nil
}

func (a *Admin) readFence(ctx context.Context, db pgfence.DBTX, lease string) (Fence, error) {
	r, err := a.fence.FenceGet(ctx, db, lease)
	f := Fence{Lease: lease, Version: "0"}
	switch {
	case errors.Is(err, pgfence.ErrNotFound):
		return f, nil
	case err != nil:
		return Fence{}, err
	}
	f.Highest, f.UpdatedAt, f.Version = r.Revision, r.UpdatedAt, strconv.FormatInt(r.Revision, 10)
	return f, nil
}

// FenceReset records to instead of the lease's highest revision (0 deletes the
// row), through pgfence.ResetFence — compare-and-set on the revision shown,
// recorded in pgfence's audit table and in coordctl's, in one transaction.
func (a *Admin) FenceReset(ctx context.Context, lease string, to int64, req Request) (Change, error) {
	if err := CheckResetLease(lease); err != nil {
		return Change{}, err
	}
	if req.Expect != "" {
		if _, err := strconv.ParseInt(req.Expect, 10, 64); err != nil {
			return Change{}, fmt.Errorf("coordctl: fence reset: --expect %q is not a revision", req.Expect)
		}
	}
	return a.mutate(ctx, op{
		action: "fence.reset", target: lease,
		lock: func(ctx context.Context, tx pgx.Tx) (any, string, error) {
			f, err := a.readFence(ctx, tx, lease)
			if err == nil && f.Highest == 0 { // nothing to reset: a reset would create a row
				return f, f.Version, fmt.Errorf("%w: %s has no fence row: nothing to reset (no token of it was ever fenced; check the name with `coordctl fences list`)", ErrNotFound, lease)
			}
			return f, f.Version, err
		},
		gone: func(error) bool { return false },
		apply: func(ctx context.Context, tx pgx.Tx, before any) error {
			expect := before.(Fence).Highest
			if req.DryRun { // FenceReset logs a reset it believes done: predict instead
				if to == expect {
					return fmt.Errorf("coordctl: fence reset: the row already holds %d", to)
				}
				return nil
			}
			_, err := a.fence.FenceReset(ctx, tx, lease, pgfence.ResetOpts{Actor: req.Actor, Reason: req.Reason, ExpectHighest: expect, To: to})
			var rc *pgfence.ResetConflictError
			if errors.As(err, &rc) { // a guard wrote between our read and the reset
				return &ConflictError{Action: "fence.reset", Target: lease, Expected: strconv.FormatInt(expect, 10),
					Actual: strconv.FormatInt(rc.Actual, 10), Current: Fence{Lease: lease, Highest: rc.Actual, Version: strconv.FormatInt(rc.Actual, 10)}}
			}
			return err
		},
		after: func(ctx context.Context, tx pgx.Tx) (any, error) {
			if req.DryRun {
				return Fence{Lease: lease, Highest: to, Version: strconv.FormatInt(to, 10)}, nil
			}
			return a.readFence(ctx, tx, lease)
		},
	}, req)
}

// checkLease refuses a lease argument that is no lease name (an *ArgError).
func checkLease(lease string) error {
	if err := coord.ValidateLease(lease); err != nil {
		return &ArgError{Arg: "lease", Reason: err.Error()}
	}
	return nil
}

// coordLease splits a coordkit lease, /tenants/{tenant}/elections/{name}.
func coordLease(lease string) (tenant, name string, ok bool) {
	rest, found := strings.CutPrefix(lease, "/tenants/")
	if !found {
		return "", "", false
	}
	tenant, name, found = strings.Cut(rest, "/elections/")
	if !found || tenant == "" || name == "" || strings.Contains(tenant, "/") || strings.Contains(name, "/") {
		return "", "", false
	}
	return tenant, name, coord.ValidateName("tenant", tenant, coord.MaxTenantLen) == nil
}

// CheckResetLease refuses a fence reset of a lease that is no coordkit lease
// (/tenants/{tenant}/elections/{name}): a typo would otherwise name a row that
// no holder ever writes. It returns an *ArgError.
func CheckResetLease(lease string) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	if _, _, ok := coordLease(lease); !ok {
		return &ArgError{Arg: "lease", Reason: fmt.Sprintf("%q is not a coordkit lease (/tenants/{tenant}/elections/{name}, as `fences list` and a token's lease show it)", lease)}
	}
	return nil
}
