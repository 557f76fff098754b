package admin

import (
	"context"

	"github.com/coordkit/coordkit/outbox"
	"github.com/coordkit/coordkit/saga"
)

// Page sizes: the default, and the most a page may hold.
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// SagaStates are the states a saga can be in, in the order views list them.
var SagaStates = []string{"running", "compensating", "needs_human", "completed", "compensated"}

// SagaPage is one page of sagas with what an operator needs around it: how
// many match in all, how many are in each state (the filter's other criteria
// applied), and where the next page starts.
type SagaPage struct {
	Sagas []Saga `json:"sagas"`
	// Total counts the sagas the filter selects, over every page.
	Total int64 `json:"total"`
	// Counts has every state's count under the filter's type, age and search
	// (its states aside): what each state filter would select.
	Counts map[string]int64 `json:"counts"`
	// Next is the After of the next page ("": this is the last).
	Next string `json:"next,omitempty"`
}

// pageLimit is the size of a page asked for with limit: DefaultPageSize for 0,
// an *ArgError outside [1, MaxPageSize].
func pageLimit(limit int) (int, error) {
	if limit == 0 {
		return DefaultPageSize, nil
	}
	if limit < 0 || limit > MaxPageSize {
		return 0, &ArgError{Arg: "limit", Reason: "outside [1, 1000]"}
	}
	return limit, nil
}

// SagaPage reads one page of the sagas f selects (keyset: f.After is the
// previous page's Next) and the counts per state, in two queries.
func (a *Admin) SagaPage(ctx context.Context, f SagaFilter) (SagaPage, error) {
	c, _, err := a.sagas(ctx)
	if err != nil {
		return SagaPage{}, err
	}
	if f.Limit, err = pageLimit(f.Limit); err != nil {
		return SagaPage{}, err
	}
	opts := f.opts()
	all := *opts
	all.States = nil
	var res saga.SagaListResult
	var counts []saga.StateCount
	// The page and the counts at once, on two connections: each may scan (a
	// search), so their sum would be the page's time.
	if err := both(ctx, func(ctx context.Context) (err error) { res, err = c.SagaList(ctx, opts); return err },
		func(ctx context.Context) (err error) { counts, err = c.SagaCount(ctx, &all); return err }); err != nil {
		return SagaPage{}, err
	}
	p := SagaPage{Sagas: make([]Saga, 0, len(res.Sagas)), Counts: map[string]int64{}, Next: res.Next}
	for _, s := range SagaStates {
		p.Counts[s] = 0
	}
	for _, sc := range counts {
		p.Counts[string(sc.State)] += sc.Count
	}
	for s, n := range p.Counts {
		if len(f.States) == 0 || contains(f.States, s) {
			p.Total += n
		}
	}
	for _, i := range res.Sagas {
		p.Sagas = append(p.Sagas, a.sagaOf(i, false))
	}
	return p, nil
}

func (f SagaFilter) opts() *saga.SagaListOpts {
	o := &saga.SagaListOpts{Type: f.Type, OlderThan: f.OlderThan, Search: f.Search, After: f.After, Limit: f.Limit}
	for _, s := range f.States {
		o.States = append(o.States, saga.State(s))
	}
	return o
}

// both runs reads at once and returns the first error (the others are
// cancelled).
func both(ctx context.Context, reads ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(reads))
	for _, r := range reads {
		go func() { errs <- r(ctx) }()
	}
	var first error
	for range reads {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ParkedFilter selects parked events: by key, topic or type, by a search (a
// key prefix or text of the last error), a page at a time.
type ParkedFilter struct {
	Key, Topic, Type, Search string
	After                    string // the previous page's Next
	Limit                    int    // default DefaultPageSize
}

// IsZero reports whether f selects every parked event.
func (f ParkedFilter) IsZero() bool {
	return f.Key == "" && f.Topic == "" && f.Type == "" && f.Search == ""
}

func (f ParkedFilter) opts() *outbox.ParkedListOpts {
	return &outbox.ParkedListOpts{Key: f.Key, Topic: f.Topic, Type: f.Type, Search: f.Search, After: f.After, Limit: f.Limit, MaxPayload: maxPayloadShown}
}

// ParkedPage is one page of parked events, how many the filter selects in all,
// and the outbox's status (its backlog, lag and counts per state).
type ParkedPage struct {
	Events []ParkedEvent `json:"events"`
	Total  int64         `json:"total"` // parked events the filter selects, over every page
	// Counts are the outbox's events per state: pending (not yet published,
	// parked keys' followers included) and parked (all of them, whatever the
	// filter).
	Counts map[string]int64 `json:"counts"`
	Next   string           `json:"next,omitempty"`
	Status OutboxStatus     `json:"status"`
}

// ParkedPage reads one page of the parked events f selects (keyset, in outbox
// order), how many it selects in all and the outbox's status.
func (a *Admin) ParkedPage(ctx context.Context, f ParkedFilter) (ParkedPage, error) {
	pool, err := a.db(ctx)
	if err != nil {
		return ParkedPage{}, err
	}
	if f.Limit, err = pageLimit(f.Limit); err != nil {
		return ParkedPage{}, err
	}
	var res outbox.ParkedListResult
	var p ParkedPage
	count := int64(-1)
	// The page, the status and (for a filter) the count at once.
	if err := both(ctx, func(ctx context.Context) (err error) { res, err = a.ob.ParkedList(ctx, pool, f.opts()); return err },
		func(ctx context.Context) (err error) { p.Status, err = a.OutboxStatus(ctx); return err },
		func(ctx context.Context) (err error) {
			if !f.IsZero() {
				count, err = a.ob.ParkedCount(ctx, pool, f.opts())
			}
			return err
		}); err != nil {
		return ParkedPage{}, err
	}
	p.Events, p.Next = make([]ParkedEvent, 0, len(res.Events)), res.Next
	for _, e := range res.Events {
		p.Events = append(p.Events, parkedOf(e))
	}
	p.Counts = map[string]int64{"pending": p.Status.Pending, "parked": p.Status.Parked}
	p.Total = p.Status.Parked
	if count >= 0 {
		p.Total = count
	}
	return p, nil
}
