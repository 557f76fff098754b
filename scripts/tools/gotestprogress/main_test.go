package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// output is plain `go test` output, abridged: a passing package, a failing one
// with its test's output, a package without tests and a build failure.
const output = `ok  	ex/ok	0.2s
--- FAIL: TestC (0.00s)
    c_test.go:9: want 1, got 2
FAIL
FAIL	ex/bad	0.3s
?   	ex/none	[no test files]
# ex/broken
broken.go:3:1: syntax error
FAIL	ex/broken [build failed]
ok  	ex/cached	(cached)
`

func TestPrinterPassesThroughAndCounts(t *testing.T) {
	var out strings.Builder
	p := newPrinter(&out, 5, "")
	if err := p.read(strings.NewReader(output)); err != nil {
		t.Fatal(err)
	}
	if p.summary() {
		t.Error("summary reported success for output with failures")
	}
	got := out.String()
	if !strings.HasPrefix(got, output) {
		t.Errorf("output not passed through unchanged:\n%s", got)
	}
	for _, want := range []string{
		"packages: 2 passed, 2 failed (1 without tests;",
		"failed: ex/bad ex/broken",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

// Two go test commands side by side: every line of each arrives whole, and
// the counts are of both.
func TestPrinterReadsSeveralFilesAtOnce(t *testing.T) {
	dir := t.TempDir()
	var a, b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&a, "ok  \ta/p%d\t0.1s\n", i)
		fmt.Fprintf(&b, "%s\nFAIL\tb/p%d\t0.2s\n", strings.Repeat("x", 5000), i)
	}
	for name, text := range map[string]string{"a": a.String(), "b": b.String()} {
		if err := os.WriteFile(dir+"/"+name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	p := newPrinter(&out, 0, "")
	if err := p.readAll([]string{dir + "/a", dir + "/b"}); err != nil {
		t.Fatal(err)
	}
	if p.passed != 2000 || len(p.failed) != 2000 {
		t.Fatalf("counted %d passed, %d failed; want 2000 of each", p.passed, len(p.failed))
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, "ok  \ta/p") && !strings.HasPrefix(line, "FAIL\tb/p") && line != strings.Repeat("x", 5000) {
			t.Fatalf("a line mixed from both files: %.80q", line)
		}
	}
	if err := p.readAll([]string{dir + "/missing"}); err == nil {
		t.Error("readAll of a missing file: no error")
	}
}

func TestPrinterPassAndEmpty(t *testing.T) {
	var out strings.Builder
	p := newPrinter(&out, 0, "")
	p.read(strings.NewReader("ok  \tex/ok\t0.1s\n"))
	if !p.summary() {
		t.Errorf("a passing run failed:\n%s", out.String())
	}
	empty := newPrinter(&out, 0, "")
	empty.read(strings.NewReader("?   \tex/none\t[no test files]\n"))
	if empty.summary() {
		t.Error("a run in which no package passed was reported as passing")
	}
}

func TestProgressLine(t *testing.T) {
	var out strings.Builder
	p := newPrinter(&out, 3, "")
	p.read(strings.NewReader("ok  \tex/a\t0.1s\n"))
	line := p.progress([]proc{{"outbox.test", 70 * time.Second}, {"compile", time.Second}, {"postgres", time.Second}})
	for _, want := range []string{"1/3 packages reported", "running outbox.test 1m10s", "compiling (1 compiler processes)"} {
		if !strings.Contains(line, want) {
			t.Errorf("progress line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "postgres") {
		t.Errorf("progress line %q names a server, not a test binary", line)
	}
}

// TestDescendants: a child of this process is found, by its full name, with its age.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, p := range descendants(os.Getpid(), 0) {
			if p.name == "sleep" && p.age >= 0 && p.age < time.Minute {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child sleep was not among the descendants: %v", descendants(os.Getpid(), 0))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
