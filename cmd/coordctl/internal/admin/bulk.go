package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/audit"
	"github.com/coordkit/coordkit/internal/pgtx"
	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
)

// MaxBulkRows bounds one bulk change: a larger selection is refused (narrow the
// filter), so that one transaction never locks an unbounded set.
const MaxBulkRows = 50000

// bulkSample is how many of the selected objects a bulk change shows.
const bulkSample = 10

// BulkChange is what a bulk change did or, as a dry run (its preview), would
// do: how many objects, which first, and the selection's version — the digest
// of every selected object's own version, which the change compares (per
// object: nothing changed since the preview) before it acts.
type BulkChange struct {
	Action string `json:"action"` // outbox.requeue.bulk, outbox.discard.bulk, saga.retry.bulk
	Target string `json:"target"` // the selection as text: "key=order-1001", "ids=3", "all"
	DryRun bool   `json:"dry_run"`
	Rows   int    `json:"rows"` // objects acted on (or that would be)
	// Version is the selection's version: pass it as --expect (the console's
	// confirm form does) so that the change acts on exactly what was previewed.
	Version string        `json:"version"`
	Sample  []any         `json:"sample"` // the first objects, as they were before
	AuditID int64         `json:"audit_id,omitempty"`
	At      time.Time     `json:"at,omitzero"`
	Took    time.Duration `json:"took_ns"`
}

// ParkedSelection names the parked events a bulk change acts on: the ids an
// operator ticked, or every event a filter selects (All for no filter at all).
type ParkedSelection struct {
	IDs    []string
	Filter ParkedFilter
	All    bool
}

// String is the selection as the audit row's target records it.
func (s ParkedSelection) String() string {
	return selectionText(s.IDs, [][2]string{{"key", s.Filter.Key}, {"topic", s.Filter.Topic}, {"type", s.Filter.Type}, {"search", s.Filter.Search}})
}

// selectionText is a selection as the audit row's target records it: how many
// ids it names, else its filter's non-empty fields (name=value), else "all".
func selectionText(ids []string, filter [][2]string) string {
	if len(ids) > 0 {
		return fmt.Sprintf("ids=%d", len(ids))
	}
	var parts []string
	for _, kv := range filter {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func (s ParkedSelection) check() error {
	switch {
	case len(s.IDs) > 0 && (!s.Filter.IsZero() || s.All):
		return &ArgError{Arg: "selection", Reason: "ids or a filter, not both"}
	case len(s.IDs) == 0 && s.Filter.IsZero() && !s.All:
		return &ArgError{Arg: "selection", Reason: "empty: name ids, a filter (key, topic, type, search) or all"}
	case len(s.IDs) > MaxBulkRows:
		return &ArgError{Arg: "selection", Reason: fmt.Sprintf("%d ids, over %d", len(s.IDs), MaxBulkRows)}
	}
	for _, id := range s.IDs {
		if _, err := parseEventID(id); err != nil {
			return err
		}
	}
	return nil
}

// ParkedBulk requeues (action "requeue") or discards ("discard") every parked
// event sel selects, in one transaction: it selects them, locks them (their
// keys' relay locks, then the rows), digests each one's version into the
// selection's version and, unless it equals req.Expect (when set), refuses with
// a *ConflictError (recorded in the audit table) — so the change acts on exactly
// the events that were previewed, each as it was. Then one statement moves or
// deletes them all, and ONE audit row records the change with its row count and
// the ids. req.DryRun previews: the count, the first events and the version,
// nothing changed, nothing audited.
func (a *Admin) ParkedBulk(ctx context.Context, action string, sel ParkedSelection, req Request) (BulkChange, error) {
	if action != "requeue" && action != "discard" {
		return BulkChange{}, &ArgError{Arg: "action", Reason: fmt.Sprintf("%q: want requeue or discard", action)}
	}
	if err := sel.check(); err != nil {
		return BulkChange{}, err
	}
	ch := BulkChange{Action: "outbox." + action + ".bulk", Target: sel.String()}
	return a.bulk(ctx, &ch, req, func(ctx context.Context, tx pgx.Tx) (bulkSet, error) {
		ids, err := a.parkedIDs(ctx, tx, sel)
		if err != nil {
			return bulkSet{}, err
		}
		locked, err := a.ob.ParkedLockAllTx(ctx, tx, ids)
		if err != nil {
			return bulkSet{}, err
		}
		set := bulkSet{apply: func(ctx context.Context, tx pgx.Tx) (int64, error) {
			got := make([]outbox.ID, len(locked))
			for i, p := range locked {
				got[i] = p.ID
			}
			if action == "requeue" {
				return a.ob.ParkedRequeueTx(ctx, tx, got)
			}
			return a.ob.ParkedDiscardTx(ctx, tx, got)
		}}
		for _, p := range locked {
			e := parkedOf(p)
			e.Payload, e.Headers = "", nil // the audit row keeps the decision, not the payloads
			set.add(e.ID, e.Version, e)
		}
		return set, nil
	})
}

// parkedIDs reads the ids of the parked events sel selects (in tx).
func (a *Admin) parkedIDs(ctx context.Context, tx pgx.Tx, sel ParkedSelection) ([]outbox.ID, error) {
	if len(sel.IDs) > 0 {
		ids := make([]outbox.ID, 0, len(sel.IDs))
		for _, s := range sel.IDs {
			id, _ := parseEventID(s) // checked
			ids = append(ids, id)
		}
		return ids, nil
	}
	f := sel.Filter
	f.After, f.Limit = "", outbox.MaxParkedListLimit
	var ids []outbox.ID
	for {
		o := f.opts()
		o.MaxPayload = 1
		res, err := a.ob.ParkedList(ctx, tx, o)
		if err != nil {
			return nil, err
		}
		for _, e := range res.Events {
			ids = append(ids, e.ID)
		}
		if len(ids) > MaxBulkRows {
			return nil, &ArgError{Arg: "selection", Reason: fmt.Sprintf("%s selects over %d parked events: narrow it", sel, MaxBulkRows)}
		}
		if res.Next == "" {
			return ids, nil
		}
		f.After = res.Next
	}
}

// SagaSelection names the sagas a bulk retry acts on: ids, or every saga a
// filter selects (All for no filter). Only running and compensating sagas are
// retried: the others in the selection are left out (the preview's count says so).
type SagaSelection struct {
	IDs    []string
	Filter SagaFilter
	All    bool
}

// String is the selection as the audit row's target records it.
func (s SagaSelection) String() string {
	older := ""
	if s.Filter.OlderThan > 0 {
		older = s.Filter.OlderThan.String()
	}
	return selectionText(s.IDs, [][2]string{{"state", strings.Join(s.Filter.States, ",")}, {"type", s.Filter.Type}, {"search", s.Filter.Search}, {"older-than", older}})
}

// SagaRetryBulk makes every running or compensating saga sel selects due now,
// as ParkedBulk acts: selected, each locked and its version digested into the
// selection's version (compared with req.Expect), retried, and audited as one
// row with the count; req.DryRun previews.
func (a *Admin) SagaRetryBulk(ctx context.Context, sel SagaSelection, req Request) (BulkChange, error) {
	f := sel.Filter
	switch {
	case len(sel.IDs) > 0 && (len(f.States) > 0 || f.Type != "" || f.Search != "" || f.OlderThan > 0 || sel.All):
		return BulkChange{}, &ArgError{Arg: "selection", Reason: "ids or a filter, not both"}
	case len(sel.IDs) == 0 && len(f.States) == 0 && f.Type == "" && f.Search == "" && f.OlderThan == 0 && !sel.All:
		return BulkChange{}, &ArgError{Arg: "selection", Reason: "empty: name ids, a filter (state, type, search, older-than) or all"}
	}
	for _, id := range sel.IDs {
		if err := checkID("saga id", id); err != nil {
			return BulkChange{}, err
		}
	}
	c, _, err := a.sagas(ctx)
	if err != nil {
		return BulkChange{}, err
	}
	ch := BulkChange{Action: "saga.retry.bulk", Target: sel.String()}
	return a.bulk(ctx, &ch, req, func(ctx context.Context, tx pgx.Tx) (bulkSet, error) {
		ids := slices.Clone(sel.IDs)
		if len(ids) == 0 {
			o := f.opts()
			o.After, o.Limit = "", saga.MaxListLimit
			for {
				res, err := c.SagaList(ctx, o)
				if err != nil {
					return bulkSet{}, err
				}
				for _, i := range res.Sagas {
					ids = append(ids, i.ID)
				}
				if len(ids) > MaxBulkRows {
					return bulkSet{}, &ArgError{Arg: "selection", Reason: fmt.Sprintf("%s selects over %d sagas: narrow it", sel, MaxBulkRows)}
				}
				if res.Next == "" {
					break
				}
				o.After = res.Next
			}
		}
		var set bulkSet
		var due []string
		for _, id := range ids {
			i, err := c.SagaLockTx(ctx, tx, id)
			if err != nil {
				return bulkSet{}, err
			}
			if i.State != saga.StateRunning && i.State != saga.StateCompensating {
				continue
			}
			s := a.sagaOf(i, false)
			due = append(due, id)
			set.add(s.ID, s.Version, s)
		}
		set.apply = func(ctx context.Context, tx pgx.Tx) (int64, error) {
			for _, id := range due {
				if err := c.SagaRetryTx(ctx, tx, id); err != nil {
					return 0, err
				}
			}
			return int64(len(due)), nil
		}
		return set, nil
	})
}

// bulkSet is a locked selection: each object's id and version, the first few
// objects, and how to act on all of them.
type bulkSet struct {
	keys   []string // id and version of each, in order
	ids    []string
	sample []any
	apply  func(ctx context.Context, tx pgx.Tx) (int64, error)
}

func (b *bulkSet) add(id, version string, v any) {
	b.keys = append(b.keys, id+"@"+version)
	b.ids = append(b.ids, id)
	if len(b.sample) < bulkSample {
		b.sample = append(b.sample, v)
	}
}

// bulk runs one bulk change: check the request, begin, select and lock (read),
// compare the selection's version, apply, audit once, commit.
func (a *Admin) bulk(ctx context.Context, ch *BulkChange, req Request, read func(context.Context, pgx.Tx) (bulkSet, error)) (BulkChange, error) {
	start := time.Now()
	tx, err := a.begin(ctx, req, ch.Action, ch.Target)
	if err != nil {
		return BulkChange{}, err
	}
	defer pgtx.Rollback(ctx, tx)
	set, err := read(ctx, tx)
	if err != nil {
		return BulkChange{}, err
	}
	ch.DryRun, ch.Rows, ch.Version, ch.Sample = req.DryRun, len(set.keys), version(set.keys...), set.sample
	if ch.Sample == nil {
		ch.Sample = []any{}
	}
	if req.Expect != "" && req.Expect != ch.Version {
		now := *ch
		ch.DryRun = true
		o := op{action: ch.Action, target: ch.Target}
		return now, a.conflict(ctx, o, req, now, ch.Version)
	}
	if req.DryRun {
		ch.Took = time.Since(start)
		return *ch, nil
	}
	n, err := set.apply(ctx, tx)
	if err != nil {
		return BulkChange{}, fmt.Errorf("coordctl: %s %s: %w", ch.Action, ch.Target, err)
	}
	if n != int64(len(set.keys)) {
		return BulkChange{}, fmt.Errorf("coordctl: %s %s: acted on %d of the %d locked objects: nothing changed", ch.Action, ch.Target, n, len(set.keys))
	}
	rows := n
	e := audit.Entry{Actor: req.Actor, Via: req.Via, Action: ch.Action, Target: ch.Target, Reason: req.Reason, Outcome: audit.Applied, Rows: &rows}
	before := map[string]any{"selection": ch.Target, "rows": n, "version": ch.Version, "ids": set.ids}
	after := map[string]any{"rows": n, "done": strings.TrimSuffix(strings.TrimPrefix(ch.Action, strings.SplitN(ch.Action, ".", 2)[0]+"."), ".bulk")}
	if ch.AuditID, ch.At, err = a.trail.Record(ctx, tx, e, before, after); err != nil {
		return BulkChange{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return BulkChange{}, fmt.Errorf("coordctl: %s %s: commit (outcome unknown: see the audit table): %w", ch.Action, ch.Target, err)
	}
	ch.Took = time.Since(start)
	a.log.InfoContext(ctx, "coordctl: "+ch.Action, "target", ch.Target, "rows", n, "actor", req.Actor, "via", req.Via,
		"reason", req.Reason, "audit_id", ch.AuditID, "took", ch.Took)
	return *ch, nil
}
