package saga

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// Bounds of SagaListOpts.Limit.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

// SagaListOpts selects sagas for SagaList and SagaCount. A nil *SagaListOpts
// selects every saga (SagaList: the first DefaultListLimit).
type SagaListOpts struct {
	Type      string        // only this saga type; default any
	States    []State       // only these states; default any
	OlderThan time.Duration // only sagas in their state for at least this long; default 0
	// Search keeps the sagas whose id starts with it or whose last error
	// contains it (case-insensitive); default "" (no search). The id prefix
	// uses the table's primary key; the error text is scanned.
	Search string
	// After is SagaListResult.Next of the previous page: the page starts after
	// it (keyset pagination, stable while sagas change). Default "": the first page.
	// SagaCount ignores it.
	After string
	// Limit is at most how many sagas one page holds. Default DefaultListLimit;
	// at most MaxListLimit. SagaCount ignores it.
	Limit int
}

// SagaListResult is one page of SagaList.
type SagaListResult struct {
	Sagas []Info
	// Next is the After of the next page; "" when this page is the last.
	Next string
}

// SagaList returns one page of the sagas opts selects, oldest in their state
// first (by state_since, then id): the operator's view (coordctl saga list). Pages
// are keyset-paginated: SagaListResult.Next continues after the last saga shown,
// so sagas that come or go before it do not shift the next page (as an offset
// would: a saga skipped or shown twice); a saga that does not change between
// pages is shown exactly once. It is read-only: one query, which ctx
// cancels. An unknown state, a bad limit or cursor returns ErrInvalidConfig.
func (c *Client) SagaList(ctx context.Context, opts *SagaListOpts) (SagaListResult, error) {
	var o SagaListOpts
	if opts != nil {
		o = *opts
	}
	if o.Limit == 0 {
		o.Limit = DefaultListLimit
	}
	if o.Limit < 0 || o.Limit > MaxListLimit {
		return SagaListResult{}, fmt.Errorf("%w: list limit %d outside [1, %d]", ErrInvalidConfig, o.Limit, MaxListLimit)
	}
	where, args, err := o.where(true)
	if err != nil {
		return SagaListResult{}, err
	}
	args = append(args, o.Limit+1)
	rows, err := c.pool.Query(ctx, `SELECT `+infoCols+` FROM `+c.table()+where+
		` ORDER BY state_since, id LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return SagaListResult{}, fmt.Errorf("saga: list: %w", err)
	}
	infos, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Info, error) { return scanInfo(r) })
	if err != nil {
		return SagaListResult{}, fmt.Errorf("saga: list: %w", err)
	}
	res := SagaListResult{Sagas: infos}
	if len(infos) > o.Limit {
		res.Sagas = infos[:o.Limit]
		last := res.Sagas[o.Limit-1]
		res.Next = encodeCursor(last.StateSince, last.ID)
	}
	return res, nil
}

// SagaCount counts the sagas opts selects (its After and Limit aside) by type
// and state, with the oldest of each: the operator's per-state counts. It is
// read-only: one query, which ctx cancels. Counting terminal states scans every
// finished saga that matches (use opts.States to leave them out where the table
// is large). Errors as SagaList.
func (c *Client) SagaCount(ctx context.Context, opts *SagaListOpts) ([]StateCount, error) {
	var o SagaListOpts
	if opts != nil {
		o = *opts
	}
	where, args, err := o.where(false)
	if err != nil {
		return nil, err
	}
	rows, err := c.pool.Query(ctx, `SELECT saga_type, state, count(*), min(state_since) FROM `+c.table()+where+
		` GROUP BY saga_type, state ORDER BY saga_type, state`, args...)
	if err != nil {
		return nil, fmt.Errorf("saga: count: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StateCount, error) {
		var s StateCount
		var state string
		err := r.Scan(&s.Type, &state, &s.Count, &s.OldestSince)
		s.State = State(state)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("saga: count: %w", err)
	}
	return out, nil
}

// where renders o's filters (and, with page, its cursor) as a WHERE clause with
// only the predicates set, so each shape gets a plan of its own.
func (o SagaListOpts) where(page bool) (string, []any, error) {
	var conds []string
	var args []any
	arg := func(v any) string { args = append(args, v); return "$" + strconv.Itoa(len(args)) }
	if o.Type != "" {
		conds = append(conds, "saga_type = "+arg(o.Type))
	}
	if len(o.States) > 0 {
		states := make([]string, 0, len(o.States))
		for _, s := range o.States {
			if !s.valid() {
				return "", nil, fmt.Errorf("%w: unknown state %q", ErrInvalidConfig, s)
			}
			states = append(states, string(s))
		}
		if len(states) == 1 { // so that the (state, state_since, id) index orders the page
			conds = append(conds, "state = "+arg(states[0]))
		} else {
			conds = append(conds, "state = ANY("+arg(states)+"::text[])")
		}
	}
	if o.OlderThan < 0 {
		return "", nil, fmt.Errorf("%w: list age %v negative", ErrInvalidConfig, o.OlderThan)
	}
	if o.OlderThan > 0 {
		conds = append(conds, "state_since <= now() - make_interval(secs => "+arg(secs(o.OlderThan))+")")
	}
	if o.Search != "" {
		s := arg(o.Search)
		conds = append(conds, "(starts_with(id, "+s+") OR strpos(lower(coalesce(last_error, '')), lower("+s+")) > 0)")
	}
	if page && o.After != "" {
		since, id, err := decodeCursor(o.After)
		if err != nil {
			return "", nil, err
		}
		conds = append(conds, "(state_since, id) > ("+arg(since)+"::timestamptz, "+arg(id)+")")
	}
	if len(conds) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// A cursor is "<state_since in Unix microseconds>/<id>", base64url: opaque to
// callers, exact for PostgreSQL's microsecond timestamps.
func encodeCursor(since time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(since.UnixMicro(), 10) + "/" + id))
}

func decodeCursor(s string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if us, id, ok := strings.Cut(string(b), "/"); ok {
			if n, err := strconv.ParseInt(us, 10, 64); err == nil {
				return time.UnixMicro(n), id, nil
			}
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: list cursor %q is not a SagaListResult.Next", ErrInvalidConfig, s)
}

// ListOpts filters List. A nil *ListOpts lists the 100 oldest sagas of any state.
//
// Deprecated: use SagaListOpts with SagaList.
type ListOpts struct {
	Type      string        // only this saga type; default any
	States    []State       // only these states; default any
	OlderThan time.Duration // only sagas in their state for at least this long; default 0
	Limit     int           // default 100, at most 10000
}

// List returns sagas oldest-in-state first. It blocks for one query; ctx cancels
// it. An unknown state or a bad limit returns ErrInvalidConfig.
//
// Deprecated: use SagaList, which pages (SagaListResult.Next) and searches.
func (c *Client) List(ctx context.Context, opts *ListOpts) ([]Info, error) {
	var o SagaListOpts
	if opts != nil {
		o = SagaListOpts{Type: opts.Type, States: opts.States, OlderThan: opts.OlderThan, Limit: opts.Limit}
	}
	res, err := c.SagaList(ctx, &o)
	return res.Sagas, err
}

// StateCount is how many sagas of one type are in one state, and since when the
// oldest of them has been.
type StateCount struct {
	Type        string
	State       State
	Count       int64
	OldestSince time.Time // state_since of the oldest
}

// Summary counts the non-terminal sagas (running, compensating, needs_human) by
// type and state, with the oldest of each. It is read-only: one query, which ctx
// cancels.
//
// Deprecated: use SagaCount with States running, compensating and needs_human.
func (c *Client) Summary(ctx context.Context) ([]StateCount, error) {
	return c.SagaCount(ctx, &SagaListOpts{States: []State{StateRunning, StateCompensating, StateNeedsHuman}})
}

// table is the saga table's quoted, schema-qualified name.
func (c *Client) table() string { return pgschema.Qualified(c.cfg.Schema, c.cfg.Table) }
