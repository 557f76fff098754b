package coordtest

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// Result is the figure a fault scenario reports: how many trials ran, which faults
// were injected (counted, so a reader sees they happened) and what survived.
// scripts/chaos.sh gathers every Result of a run into docs/reliability.md.
type Result struct {
	Scenario string           `json:"scenario"`
	Package  string           `json:"package,omitempty"`
	Tier     string           `json:"tier"` // "bounded" or "full"
	Trials   int              `json:"trials"`
	Faults   map[string]int   `json:"faults"`
	Outcome  map[string]int64 `json:"outcome"`
	Notes    string           `json:"notes,omitempty"`
	Pass     bool             `json:"pass"`
	Seconds  float64          `json:"seconds"`
	At       time.Time        `json:"at"`
	// Started is when the scenario began; Report computes Seconds from it.
	Started time.Time `json:"-"`
}

// NewResult starts a Result for scenario, timed from now.
func NewResult(scenario string) *Result {
	return &Result{Scenario: scenario, Faults: map[string]int{}, Outcome: map[string]int64{}, Started: time.Now()}
}

// Full reports whether the full reliability tier runs (COORD_FULL=1, set by
// scripts/chaos.sh): more trials, longer faults.
func Full() bool { return os.Getenv("COORD_FULL") == "1" }

// Pick returns bounded in the default tier and full under COORD_FULL=1.
func Pick[T any](bounded, full T) T {
	if Full() {
		return full
	}
	return bounded
}

// Report logs r as a "RESULT {json}" line and, when COORD_RELIABILITY_REPORT names a
// file, appends it there. Defer it right after NewResult, so it runs after the
// scenario's assertions and records whether they held.
func Report(t testing.TB, r *Result) {
	t.Helper()
	r.Tier, r.At, r.Pass = "bounded", time.Now().UTC(), !t.Failed()
	if Full() {
		r.Tier = "full"
	}
	if !r.Started.IsZero() {
		r.Seconds = time.Since(r.Started).Seconds()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Errorf("coordtest: report: %v", err)
		return
	}
	t.Logf("RESULT %s", b)
	path := os.Getenv("COORD_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("coordtest: report: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Errorf("coordtest: report: %v", err)
	}
}
