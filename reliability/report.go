package reliability

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// Result is the figure one scenario reports: how many trials ran, which faults
// were injected (counted, so a reader can see they happened) and what survived.
type Result struct {
	Scenario string           `json:"scenario"`
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

// Full reports whether the full tier runs (COORD_FULL=1, set by scripts/chaos.sh).
func Full() bool { return os.Getenv("COORD_FULL") == "1" }

// Tier returns the name of the running tier.
func Tier() string {
	if Full() {
		return "full"
	}
	return "bounded"
}

// Pick returns bounded in the bounded tier and full in the full tier.
func Pick[T any](bounded, full T) T {
	if Full() {
		return full
	}
	return bounded
}

// Report logs r (call it deferred, after the scenario has asserted) and, when COORD_RELIABILITY_REPORT names a file, appends it there
// as one JSON line (scripts/chaos.sh renders docs/reliability.md from that file).
func Report(t testing.TB, r *Result) {
	t.Helper()
	r.Tier, r.At, r.Pass = Tier(), time.Now().UTC(), !t.Failed()
	if !r.Started.IsZero() {
		r.Seconds = time.Since(r.Started).Seconds()
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT %s", b)
	path := os.Getenv("COORD_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatalf("report: %v", err)
	}
}
