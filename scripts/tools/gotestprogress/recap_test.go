package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed test's output is recapped as its first and last lines and the last of
// its own lines between, cut, and a
// crash as its stack's first lines; a passing test's lines, the package's own
// log lines and a failed test in another lane are told apart.
func TestRecapKeepsEachFailedTestsFirstAndLastLines(t *testing.T) {
	var long strings.Builder
	long.WriteString("--- FAIL: TestLong (40.2s)\n")
	for i := range 20 {
		fmt.Fprintf(&long, "    long_test.go:%d: line %d\n", i, i)
	}
	long.WriteString("    long_test.go:99: " + strings.Repeat("é", 400) + "\n")
	long.WriteString("2026/12/02 14:45:04 INFO a package log line\nFAIL\nFAIL\tex/long\t41.0s\n")
	other := "ok  \tex/ok\t0.1s\n--- FAIL: TestShort (0.00s)\n    --- FAIL: TestShort/sub (0.00s)\n        short_test.go:9: want 1, got 2\nFAIL\nFAIL\tex/short\t0.2s\n" +
		// A crash prints no test's FAIL line: its stack, up to the package's result.
		"2026/12/02 16:57:46 INFO a log line\npanic: runtime error: index out of range [0] with length 0\n\ngoroutine 214 [running]:\n" +
		"ex/plane.(*Plane).probe(0xc000001d00, 0x0)\n\t/src/plane/probe.go:137 +0xf6e\nex/plane.(*Plane).maintain(0xc000001d00)\n\t/src/plane/probe.go:82 +0x956\n" +
		"created by ex/plane.New in goroutine 206\n\t/src/plane/plane.go:98 +0x68b\n\ngoroutine 1 [chan receive]:\nex/other()\nFAIL\tex/plane\t31.2s\n"
	dir := t.TempDir()
	for name, text := range map[string]string{"a": long.String(), "b": other} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	p := newPrinter(&out, 3, "")
	p.recap = filepath.Join(dir, "recap")
	if err := p.readAll([]string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}); err != nil {
		t.Fatal(err)
	}
	if p.summary() {
		t.Fatal("a run with failures passed")
	}
	recap := recapHas(t, p,
		"--- FAIL: TestLong (40.2s)\n    long_test.go:0: line 0\n    long_test.go:1: line 1\n        … 6 more lines …\n    long_test.go:8: line 8\n",
		"    long_test.go:15: line 15\n    long_test.go:16: line 16\n",
		"    long_test.go:19: line 19\n    long_test.go:99: éé",
		"é…\n",
		"--- FAIL: TestShort (0.00s)\n    --- FAIL: TestShort/sub (0.00s)\n        short_test.go:9: want 1, got 2\n",
		"panic: runtime error: index out of range [0] with length 0\ngoroutine 214 [running]:\nex/plane.(*Plane).probe(0xc000001d00, 0x0)\n\t/src/plane/probe.go:137 +0xf6e\n",
		"\t/src/plane/plane.go:98 +0x68b\ngoroutine 1 [chan receive]:\n        … 1 more lines …\n",
	)
	for _, not := range []string{"a package log line", "a log line", "line 2\n", "ex/ok", "FAIL\tex/plane"} {
		if strings.Contains(recap, not) {
			t.Errorf("the recap has %q:\n%s", not, recap)
		}
	}
	for _, l := range strings.Split(recap, "\n") {
		if len(l) > recapWidth+len("…") {
			t.Errorf("a recap line of %d bytes: %.60q…", len(l), l)
		}
	}
	// A passing run writes none.
	pass := newPrinter(&out, 1, "")
	pass.recap = filepath.Join(dir, "recap-pass")
	if err := pass.read(strings.NewReader("ok  \tex/ok\t0.1s\n")); err != nil || !pass.summary() {
		t.Fatalf("a passing run: %v", err)
	}
	if _, err := os.Stat(pass.recap); !os.IsNotExist(err) {
		t.Errorf("a passing run wrote a recap (%v)", err)
	}
}

// A test's own lines (a _test.go file's) in the middle of its output are kept
// in the recap though a helper's dump follows them: TestFleetReconnectStorm's
// Errorf lines sat under 131 lines of its processes' output and were lost.
func TestRecapKeepsATestsOwnLinesBeforeAHelpersDump(t *testing.T) {
	var in strings.Builder
	in.WriteString("--- FAIL: TestStorm (225.59s)\n    fleet_phase_test.go:67: ready\n    fleet_phase_test.go:81: settled\n")
	for i := range 10 {
		fmt.Fprintf(&in, "    fleet_phase_test.go:%d: phase line %d\n", 100+i, i)
	}
	in.WriteString("    fleet_test.go:99: 3 etcd leader changes during the coordkit phase (target 0)\n")
	for i := range 40 {
		fmt.Fprintf(&in, "    process.go:46: output of worker%02d:\n        READY 72 72\n", i)
	}
	in.WriteString("FAIL\nFAIL\tex/reliability\t230.0s\n")
	var out strings.Builder
	p := newPrinter(&out, 1, "")
	p.recap = filepath.Join(t.TempDir(), "recap")
	if err := p.read(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	p.summary()
	recap := recapHas(t, p,
		"    fleet_test.go:99: 3 etcd leader changes during the coordkit phase (target 0)\n",
		"    fleet_phase_test.go:109: phase line 9\n",
		"        READY 72 72\n",
	)
	if strings.Contains(recap, "phase line 1\n") {
		t.Errorf("the recap keeps more than the last of the test's own lines:\n%s", recap)
	}
}

// recapHas reads the recap p wrote and reports each wanted part it lacks.
func recapHas(t *testing.T, p *printer, want ...string) string {
	t.Helper()
	b, err := os.ReadFile(p.recap)
	if err != nil {
		t.Fatalf("no recap written: %v", err)
	}
	recap := string(b)
	for _, w := range want {
		if !strings.Contains(recap, w) {
			t.Errorf("the recap lacks %q:\n%s", w, recap)
		}
	}
	return recap
}
