package admin

import (
	"strings"
	"testing"

	"github.com/coordkit/coordkit/saga"
)

func TestTimeline(t *testing.T) {
	names := []string{"reserve", "charge", "ship", "notify"}
	fail := "saga: business failure: card declined"
	for _, c := range []struct {
		name string
		info saga.Info
		want string
	}{
		{"running", saga.Info{State: saga.StateRunning, Step: 1}, "done current pending pending"},
		{"completed", saga.Info{State: saga.StateCompleted, Step: 4}, "done done done done"},
		{"compensating after a business failure", saga.Info{State: saga.StateCompensating, Step: 0, Failure: fail,
			Errors: []saga.ErrorRecord{{Step: "charge", Error: fail}}}, "compensating failed not-run not-run"},
		{"needs a human", saga.Info{State: saga.StateNeedsHuman, Step: 0, Failure: fail, Attempts: 3,
			Errors: []saga.ErrorRecord{{Step: "charge", Error: fail}, {Step: "reserve", Error: "x"}, {Step: "reserve", Error: "x"}}}, "stuck failed not-run not-run"},
		{"cancelled at charge", saga.Info{State: saga.StateCompensating, Step: 0, Failure: "cancelled: fraud",
			Errors: []saga.ErrorRecord{{Step: "", Error: "cancelled: fraud"}}}, "compensating compensated not-run not-run"},
		// Issue 29: a saga resolved by hand showed its never-run pivot as compensated.
		{"resolved compensated by hand", saga.Info{State: saga.StateCompensated, Step: 0, Failure: "resolved (compensated): alice: refunded by hand",
			Errors: []saga.ErrorRecord{{Step: "charge", Error: fail}, {Step: "reserve", Error: "x"}, {Step: "reserve", Error: "x"},
				{Step: "reserve", Error: "x"}, {Step: "", Error: "resolved (compensated): alice: refunded by hand"}}}, "compensated failed not-run not-run"},
		{"resolved skip, compensating on", saga.Info{State: saga.StateCompensating, Step: -1, Failure: "resolved (skip): bob",
			Errors: []saga.ErrorRecord{{Step: "charge", Error: fail}, {Step: "reserve", Error: "x"}}}, "compensated failed not-run not-run"},
		{"compensated", saga.Info{State: saga.StateCompensated, Step: -1, Failure: fail,
			Errors: []saga.ErrorRecord{{Step: "charge", Error: fail}}}, "compensated failed not-run not-run"},
	} {
		c.info.StepCount, c.info.PivotStep, c.info.StepNames = 4, 2, names
		steps := timeline(c.info)
		var got []string
		for _, s := range steps {
			got = append(got, strings.ReplaceAll(s.Status, " ", "-"))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: %s, want %s", c.name, strings.Join(got, " "), c.want)
		}
		if steps[2].Kind != "pivot" || steps[0].Kind != "compensatable" || steps[3].Kind != "retriable" {
			t.Errorf("%s: kinds %+v", c.name, steps)
		}
	}
	st := timeline(saga.Info{State: saga.StateNeedsHuman, StepCount: 4, PivotStep: 2, StepNames: names,
		Errors: []saga.ErrorRecord{{Step: "reserve", Error: "a"}, {Step: "reserve", Error: "b"}}})
	if st[0].Failures != 2 || st[0].LastError != "b" {
		t.Errorf("failures of reserve: %+v", st[0])
	}
}
