package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed test's output is recapped as its first and last lines, cut, and a
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
	b, err := os.ReadFile(p.recap)
	if err != nil {
		t.Fatalf("no recap written: %v", err)
	}
	recap := string(b)
	for _, want := range []string{
		"--- FAIL: TestLong (40.2s)\n    long_test.go:0: line 0\n    long_test.go:1: line 1\n        … 14 more lines …\n    long_test.go:16: line 16\n",
		"    long_test.go:19: line 19\n    long_test.go:99: éé",
		"é…\n",
		"--- FAIL: TestShort (0.00s)\n    --- FAIL: TestShort/sub (0.00s)\n        short_test.go:9: want 1, got 2\n",
		"panic: runtime error: index out of range [0] with length 0\ngoroutine 214 [running]:\nex/plane.(*Plane).probe(0xc000001d00, 0x0)\n\t/src/plane/probe.go:137 +0xf6e\n",
		"\t/src/plane/plane.go:98 +0x68b\ngoroutine 1 [chan receive]:\n        … 1 more lines …\n",
	} {
		if !strings.Contains(recap, want) {
			t.Errorf("the recap lacks %q:\n%s", want, recap)
		}
	}
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
