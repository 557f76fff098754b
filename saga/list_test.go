package saga

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"
)

// TestSagaListPagesSearchesAndCounts: SagaList walks every saga exactly once in
// (state_since, id) order through keyset pages, even when a saga already shown
// goes away between pages; filters by state and type; searches by id prefix and error
// text; SagaCount counts per state what the filters select; ErrNotFound and
// ErrInvalidConfig as documented.
func TestSagaListPagesSearchesAndCounts(t *testing.T) {
	e := newEnv(t)
	c, def := e.client(t, fastConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 25
	for i := range n {
		if _, err := Start(ctx, c, def, order{}, &StartOpts{ID: "order-" + strconv.Itoa(100+i), Delay: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	// Seven of them need a human, one of which failed with a searchable error;
	// state_since is spread so that the order is known.
	if _, err := e.db.Pool.Exec(ctx, `UPDATE coord_sagas SET state_since = now() - (substr(id, 7)::int * interval '1 second')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Pool.Exec(ctx, `UPDATE coord_sagas SET state = 'needs_human', step = 0, last_error = CASE WHEN id = 'order-103' THEN 'ledger: Account 4411 is LOCKED' ELSE 'refund failed' END
		WHERE substr(id, 7)::int % 4 = 3`); err != nil {
		t.Fatal(err)
	}

	var seen []string
	opts := &SagaListOpts{Limit: 10}
	for page := 0; ; page++ {
		res, err := c.SagaList(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range res.Sagas {
			seen = append(seen, s.ID)
		}
		if page == 0 { // a saga already shown goes away: the next page does not shift (as an OFFSET would)
			if _, err := e.db.Pool.Exec(ctx, `DELETE FROM coord_sagas WHERE id = 'order-124'`); err != nil {
				t.Fatal(err)
			}
		}
		if res.Next == "" {
			break
		}
		opts.After = res.Next
	}
	if len(seen) != n || seen[0] != "order-124" || seen[n-2] != "order-101" {
		t.Fatalf("SagaList pages = %v: want all %d, oldest in state first, each once", seen, n)
	}
	humans, err := c.SagaList(ctx, &SagaListOpts{States: []State{StateNeedsHuman}, Type: "order"})
	if err != nil || len(humans.Sagas) != 6 || humans.Next != "" {
		t.Fatalf("SagaList(needs_human) = %d sagas, next %q, %v: want 6 on one page", len(humans.Sagas), humans.Next, err)
	}
	for search, want := range map[string]int{"order-10": 10, "account 4411": 1, "REFUND": 5, "nothing like it": 0} {
		res, err := c.SagaList(ctx, &SagaListOpts{Search: search})
		if err != nil || len(res.Sagas) != want {
			t.Fatalf("SagaList(search %q) = %d sagas, %v; want %d", search, len(res.Sagas), err, want)
		}
	}
	counts, err := c.SagaCount(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byState := map[State]int64{}
	for _, sc := range counts {
		byState[sc.State] += sc.Count
	}
	if byState[StateRunning] != 18 || byState[StateNeedsHuman] != 6 || len(byState) != 2 {
		t.Fatalf("SagaCount = %+v: want 18 running (order-124 was deleted), 6 needs_human", counts)
	}
	if counts, err := c.SagaCount(ctx, &SagaListOpts{Search: "4411"}); err != nil || len(counts) != 1 || counts[0].Count != 1 {
		t.Fatalf("SagaCount(search 4411) = %+v, %v", counts, err)
	}
	for _, bad := range []*SagaListOpts{{Limit: -1}, {Limit: MaxListLimit + 1}, {States: []State{"bogus"}}, {After: "not a cursor"}, {OlderThan: -time.Second}} {
		if _, err := c.SagaList(ctx, bad); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("SagaList(%+v) = %v, want ErrInvalidConfig", bad, err)
		}
	}
	if _, err := c.SagaGet(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("SagaGet(unknown) = %v, want ErrNotFound", err)
	}
}
