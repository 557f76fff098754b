package coordtest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Result is the figure a fault scenario reports: how many trials ran, which faults
// were injected (counted by what observed them, so a reader sees they happened)
// and what survived. scripts/chaos.sh gathers every Result of a run into
// docs/reliability.md.
//
// A Result enforces its own claim. The scenario declares the faults it must inject
// (NewResult with Faults); Report fails the test, and records pass: false, when a
// declared fault was counted 0, when a fault was counted that was not declared,
// when the test failed, panicked or was skipped, or when Report was never called.
// A scenario killed before it reports (the test binary's timeout, a crash) leaves
// its "started" row without a "finished" one, which reliabilityreport rejects.
type Result struct {
	ID       string           `json:"id"`    // one run of one scenario: pairs its started and finished rows
	State    string           `json:"state"` // "started" (written by NewResult) or "finished" (by Report)
	Scenario string           `json:"scenario"`
	Package  string           `json:"package"` // the test's package, relative to the repository root
	Tier     string           `json:"tier"`    // "bounded" or "full"
	Declared []string         `json:"declared"`
	Trials   int              `json:"trials"`
	Faults   map[string]int   `json:"faults"`
	Outcome  map[string]int64 `json:"outcome"`
	Notes    string           `json:"notes,omitempty"`
	Pass     bool             `json:"pass"`
	Failures []string         `json:"failures,omitempty"` // why pass is false
	Seconds  float64          `json:"seconds"`
	At       time.Time        `json:"at"`

	// Started is when the scenario began; Report computes Seconds from it.
	Started time.Time `json:"-"`

	reported bool // Report ran; checked when the test ends
}

// Option configures a Result.
type Option func(*Result)

// Faults declares the faults a scenario must inject, by the names it counts them
// under in Result.Faults. Report fails the scenario when any of them is 0 at the
// end: a fault that did not happen proves nothing.
func Faults(names ...string) Option {
	return func(r *Result) { r.Declared = append(r.Declared, names...) }
}

// NewResult starts the Result of scenario, timed from now, and records it as
// started (see Report). Defer Report right after it:
//
//	res := coordtest.NewResult(t, "paused holder's writes are fenced off", coordtest.Faults("holder SIGSTOPped"))
//	defer coordtest.Report(t, res)
//
// The package is the calling test's, relative to the repository root. A scenario
// must declare at least one fault; NewResult fails the test otherwise.
func NewResult(t testing.TB, scenario string, opts ...Option) *Result {
	t.Helper()
	r := &Result{
		ID:       newResultID(),
		State:    "started",
		Scenario: scenario,
		Package:  callerPackage(2),
		Tier:     Pick("bounded", "full"),
		Faults:   map[string]int{},
		Outcome:  map[string]int64{},
		Started:  time.Now(),
	}
	for _, o := range opts {
		o(r)
	}
	if len(r.Declared) == 0 {
		t.Fatalf("coordtest: scenario %q declares no fault (NewResult(t, name, coordtest.Faults(...))): it cannot prove anything", scenario)
	}
	for _, f := range r.Declared {
		r.Faults[f] = 0
	}
	r.write(t)
	t.Cleanup(func() {
		if !r.reported {
			r.finish(t, nil, "never called Report (defer coordtest.Report(t, res) right after NewResult)")
		}
	})
	return r
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

// Report finishes r: it fails the test when a declared fault was counted 0, when
// a fault that was not declared was counted, or when the test failed, panicked
// or was skipped, and records the outcome in r.Pass and r.Failures. It logs r as
// a "RESULT {json}" line and, when COORD_RELIABILITY_REPORT names a file, appends
// it there as the scenario's "finished" row. Call it deferred, directly (defer
// coordtest.Report(t, res)): it recovers a panic of the scenario to record it,
// then panics again with the same value.
func Report(t testing.TB, r *Result) {
	t.Helper()
	p := recover()
	r.finish(t, p)
	if p != nil {
		panic(p)
	}
}

// finish checks r's claim, fails t for each broken part (and for each of
// failures) and writes the finished row.
func (r *Result) finish(t testing.TB, panicked any, failures ...string) {
	t.Helper()
	if r.reported {
		t.Errorf("coordtest: scenario %q reported twice", r.Scenario)
		return
	}
	r.reported = true

	for _, msg := range failures {
		t.Errorf("coordtest: scenario %q: %s", r.Scenario, msg)
	}
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		failures = append(failures, msg)
		t.Errorf("coordtest: scenario %q: %s", r.Scenario, msg)
	}
	for _, f := range r.Declared {
		if r.Faults[f] <= 0 {
			fail("declared fault %q was counted %d: the fault did not happen, so the scenario proved nothing", f, r.Faults[f])
		}
	}
	var undeclared []string
	for f := range r.Faults {
		if !slices.Contains(r.Declared, f) {
			undeclared = append(undeclared, f)
		}
	}
	sort.Strings(undeclared)
	for _, f := range undeclared {
		fail("fault %q was counted but not declared in NewResult", f)
	}
	switch {
	case panicked != nil:
		fail("panicked: %v", panicked)
	case t.Skipped():
		fail("skipped: a scenario that did not run proves nothing")
	case t.Failed() && len(failures) == 0:
		failures = append(failures, "the test failed")
	}
	r.State, r.At, r.Pass, r.Failures = "finished", time.Now().UTC(), len(failures) == 0, failures
	if !r.Started.IsZero() {
		r.Seconds = time.Since(r.Started).Seconds()
	}
	r.write(t)
}

// write logs r as a RESULT line and appends it to COORD_RELIABILITY_REPORT.
func (r *Result) write(t testing.TB) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Errorf("coordtest: report: %v", err)
		return
	}
	if r.State == "finished" {
		t.Logf("RESULT %s", b)
	}
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

func newResultID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// modulePath is the SDK's module; packages are reported relative to it.
const modulePath = "github.com/coordkit/coordkit/"

// callerPackage returns the package of the function skip frames up, relative to
// the repository root: "correctnesslease/pgfence" for
// github.com/coordkit/coordkit/correctnesslease/pgfence_test.TestX.
func callerPackage(skip int) string {
	pc, _, _, ok := runtime.Caller(skip)
	if !ok {
		return "unknown"
	}
	name := runtime.FuncForPC(pc).Name()
	slash := strings.LastIndexByte(name, '/')
	if dot := strings.IndexByte(name[slash+1:], '.'); dot >= 0 {
		name = name[:slash+1+dot]
	}
	name = strings.TrimSuffix(strings.TrimPrefix(name, modulePath), "_test")
	return name
}
