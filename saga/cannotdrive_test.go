package saga

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A stored saga whose step the runner's definition does not have (a step past
// the end or before -1: a definition that lost steps, a hand-edited row) is
// not run: it is parked in needs_human and pages PageCannotDrive. One past the
// last step while running (every step done) and -1 while compensating (nothing
// left to undo) are drivable: they only record the end.
func TestStepOutsideTheDefinitionCannotBeDriven(t *testing.T) {
	e := newEnv(t)
	pg := &pager{}
	cfg := fastConfig()
	cfg.OnPage = pg.page
	c, def := e.client(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type row struct {
		state State
		step  int
	}
	stored := map[string]row{
		"past-the-end":     {StateRunning, len(fixtureSteps) + 1},
		"before-minus-one": {StateCompensating, -2},
		"all-steps-done":   {StateRunning, len(fixtureSteps)}, // completion not recorded yet
		"nothing-to-undo":  {StateCompensating, -1},           // compensated, not recorded yet
	}
	for id, r := range stored {
		start(t, ctx, c, def, order{}, &StartOpts{ID: id})
		if _, err := e.db.Pool.Exec(ctx, `UPDATE `+DefaultTable+` SET state = $2, step = $3 WHERE id = $1`, id, string(r.state), r.step); err != nil {
			t.Fatal(err)
		}
	}
	run(t, c)
	for _, id := range []string{"past-the-end", "before-minus-one"} {
		i := waitState(t, c, id, 30*time.Second, StateNeedsHuman, StateCompleted, StateCompensated)
		if i.State != StateNeedsHuman || !strings.Contains(i.LastError, "not in this runner's definition") {
			t.Fatalf("saga %s at step %d: %s (last error %q), want needs_human: not in this runner's definition", stored[id].state, stored[id].step, i.State, i.LastError)
		}
	}
	if i := waitState(t, c, "all-steps-done", 30*time.Second, StateCompleted, StateNeedsHuman); i.State != StateCompleted {
		t.Fatalf("saga running past its last step: %s (last error %q), want completed", i.State, i.LastError)
	}
	if i := waitState(t, c, "nothing-to-undo", 30*time.Second, StateCompensated, StateNeedsHuman); i.State != StateCompensated || i.Step != -1 {
		t.Fatalf("saga compensating at step -1: %s at step %d (last error %q), want compensated at step -1", i.State, i.Step, i.LastError)
	}
	if got := effects(t, e.db.Pool, "all-steps-done"); len(got) != 0 {
		t.Fatalf("a saga with every step done ran steps again: %v", got)
	}
	cannot := 0
	for _, p := range pg.get() {
		if p.Reason == PageCannotDrive {
			cannot++
		}
	}
	if cannot != 2 {
		t.Fatalf("pages %+v, want 2 with reason %s", pg.get(), PageCannotDrive)
	}
}
