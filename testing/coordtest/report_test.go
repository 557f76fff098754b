package coordtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeT is a testing.TB whose failures are recorded instead of failing the test.
type fakeT struct {
	testing.TB
	errors   []string
	failed   bool
	skipped  bool
	cleanups []func()
}

type fatal struct{ msg string }

func (f *fakeT) Helper()             {}
func (f *fakeT) Logf(string, ...any) {}
func (f *fakeT) Failed() bool        { return f.failed }
func (f *fakeT) Skipped() bool       { return f.skipped }
func (f *fakeT) Cleanup(fn func())   { f.cleanups = append(f.cleanups, fn) }
func (f *fakeT) Errorf(format string, a ...any) {
	f.failed = true
	f.errors = append(f.errors, fmt.Sprintf(format, a...))
}
func (f *fakeT) Fatalf(format string, a ...any) {
	f.Errorf(format, a...)
	panic(fatal{fmt.Sprintf(format, a...)})
}

func (f *fakeT) runCleanups() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// rows sets COORD_RELIABILITY_REPORT to a fresh file and returns a function that
// reads the rows written to it.
func rows(t *testing.T) func() []Result {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	t.Setenv("COORD_RELIABILITY_REPORT", path)
	return func() []Result {
		t.Helper()
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var out []Result
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r Result
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("row %q: %v", sc.Text(), err)
			}
			out = append(out, r)
		}
		return out
	}
}

func TestReportPassesWhenEveryDeclaredFaultHappened(t *testing.T) {
	read := rows(t)
	ft := &fakeT{TB: t}
	r := NewResult(ft, "cut twice", Faults("connection cut", "member killed"))
	r.Faults["connection cut"] += 2
	r.Faults["member killed"]++
	r.Trials = 2
	func() { defer Report(ft, r) }()
	ft.runCleanups()
	if ft.failed {
		t.Fatalf("a scenario whose faults happened failed: %v", ft.errors)
	}
	got := read()
	if len(got) != 2 || got[0].State != "started" || got[1].State != "finished" || got[0].ID != got[1].ID {
		t.Fatalf("rows %+v, want started then finished with one id", got)
	}
	f := got[1]
	if !f.Pass || f.Package != "testing/coordtest" || f.Tier != Pick("bounded", "full") || f.Faults["connection cut"] != 2 || len(f.Failures) != 0 {
		t.Fatalf("finished row %+v", f)
	}
}

func TestReportFailsWhenADeclaredFaultIsZero(t *testing.T) {
	read := rows(t)
	ft := &fakeT{TB: t}
	r := NewResult(ft, "fault never fired", Faults("connection cut", "member killed"))
	r.Faults["member killed"] = 1
	func() { defer Report(ft, r) }()
	if !ft.failed || len(ft.errors) != 1 || !strings.Contains(ft.errors[0], `"connection cut" was counted 0`) {
		t.Fatalf("errors %q, want one naming the zero fault", ft.errors)
	}
	if f := read()[1]; f.Pass || len(f.Failures) != 1 {
		t.Fatalf("finished row %+v, want pass false with the reason", f)
	}
}

func TestReportFailsAnUndeclaredFault(t *testing.T) {
	ft := &fakeT{TB: t}
	r := NewResult(ft, "typo", Faults("connection cut"))
	r.Faults["connection cut"] = 1
	r.Faults["conection cut"] = 1
	func() { defer Report(ft, r) }()
	if !ft.failed || !strings.Contains(strings.Join(ft.errors, "\n"), `"conection cut" was counted but not declared`) {
		t.Fatalf("errors %q", ft.errors)
	}
}

func TestReportRecordsAPanicAndPanicsAgain(t *testing.T) {
	read := rows(t)
	ft := &fakeT{TB: t}
	r := NewResult(ft, "panics", Faults("connection cut"))
	r.Faults["connection cut"] = 1
	var again any
	func() {
		defer func() { again = recover() }()
		defer Report(ft, r)
		panic("boom")
	}()
	if again != "boom" {
		t.Fatalf("Report swallowed the panic: recovered %v", again)
	}
	if f := read()[1]; f.Pass || len(f.Failures) != 1 || f.Failures[0] != "panicked: boom" {
		t.Fatalf("finished row %+v, want the panic recorded", f)
	}
}

func TestReportRecordsAFailedOrSkippedTest(t *testing.T) {
	for _, c := range []struct {
		name            string
		failed, skipped bool
		want            string
	}{
		{"failed", true, false, "the test failed"},
		{"skipped", false, true, "skipped: a scenario that did not run proves nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			read := rows(t)
			ft := &fakeT{TB: t, failed: c.failed, skipped: c.skipped}
			r := NewResult(ft, c.name, Faults("connection cut"))
			r.Faults["connection cut"] = 1
			func() { defer Report(ft, r) }()
			if f := read()[1]; f.Pass || len(f.Failures) != 1 || f.Failures[0] != c.want {
				t.Fatalf("finished row %+v, want %q", f, c.want)
			}
			if !ft.failed {
				t.Fatal("the test was not failed")
			}
		})
	}
}

func TestNewResultRequiresAFault(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer func() {
			if _, ok := recover().(fatal); !ok {
				t.Fatal("NewResult without a declared fault did not stop the test")
			}
		}()
		NewResult(ft, "nothing")
	}()
}

// A scenario that forgets to call Report still leaves a finished, failed row.
func TestMissingReportFailsAtCleanup(t *testing.T) {
	read := rows(t)
	ft := &fakeT{TB: t}
	r := NewResult(ft, "forgot", Faults("connection cut"))
	r.Faults["connection cut"] = 1
	ft.runCleanups()
	if !ft.failed || !strings.Contains(strings.Join(ft.errors, "\n"), "never called Report") {
		t.Fatalf("errors %q", ft.errors)
	}
	if got := read(); len(got) != 2 || got[1].State != "finished" || got[1].Pass || !strings.Contains(got[1].Failures[0], "never called Report") {
		t.Fatalf("rows %+v", got)
	}
}

// A scenario cut short (here: nothing after NewResult) leaves only its started row.
func TestCutShortScenarioLeavesAStartedRow(t *testing.T) {
	read := rows(t)
	NewResult(&fakeT{TB: t}, "killed by the timeout", Faults("connection cut"))
	if got := read(); len(got) != 1 || got[0].State != "started" || got[0].Scenario != "killed by the timeout" {
		t.Fatalf("rows %+v, want one started row", got)
	}
}
