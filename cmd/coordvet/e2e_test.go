package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// repoRoot is the SDK checkout this module lives in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// buildCoordvet builds this command, the binary users install.
func buildCoordvet(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "coordvet")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// e2eModule lays out a temporary module that uses the real SDK through a
// replace directive to the repository root, with the SDK's own requirements and
// checksums, and the packages of testdata/e2e.
func e2eModule(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module example.com/coordvete2e")
	mod += fmt.Sprintf("\nrequire github.com/coordkit/coordkit v0.0.0-00010101000000-000000000000\n\nreplace github.com/coordkit/coordkit => %s\n", root)
	write(t, filepath.Join(dir, "go.mod"), mod)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "go.sum"), string(sum))
	for _, pkg := range []string{"bad", "good"} {
		src, err := os.ReadFile(filepath.Join("testdata", "e2e", pkg, pkg+".go"))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, pkg, pkg+".go"), string(src))
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// finding is file:line:check.
type finding string

var diagLine = regexp.MustCompile(`^(?:\./)?([^:\s]+\.go):(\d+):\d+: (pavedroad|fencetoken|forgedtoken|efficiencydecl|dualwrite|sagapivot|ignoredirective): `)

// vet runs go vet -vettool over ./... in dir and returns the coordvet findings,
// go vet's whole output, and how long it took.
func vet(t *testing.T, bin, dir string, env ...string) ([]finding, string, time.Duration) {
	t.Helper()
	return runTool(t, dir, exec.Command("go", "vet", "-vettool="+bin, "./..."), env...)
}

// runTool runs cmd in dir and collects the coordvet findings it prints, with
// file names relative to dir.
func runTool(t *testing.T, dir string, cmd *exec.Cmd, env ...string) ([]finding, string, time.Duration) {
	t.Helper()
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	var found []finding
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := diagLine.FindStringSubmatch(sc.Text()); m != nil {
			file := m[1]
			if rel, err := filepath.Rel(dir, file); err == nil && filepath.IsAbs(file) {
				file = rel
			}
			found = append(found, finding(filepath.ToSlash(file)+":"+m[2]+":"+m[3]))
		}
	}
	if err != nil && len(found) == 0 {
		t.Fatalf("%s failed without a coordvet finding: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	slices.Sort(found)
	return found, string(out), took
}

// expected reads the "e2e: check ..." markers of the e2e sources.
func expected(t *testing.T) []finding {
	t.Helper()
	var want []finding
	for _, pkg := range []string{"bad", "good"} {
		src, err := os.ReadFile(filepath.Join("testdata", "e2e", pkg, pkg+".go"))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			_, marker, ok := strings.Cut(line, "// e2e: ")
			if !ok {
				continue
			}
			for _, check := range strings.Fields(marker) {
				want = append(want, finding(fmt.Sprintf("%s/%s.go:%d:%s", pkg, pkg, i+1, check)))
			}
		}
	}
	slices.Sort(want)
	return want
}

// TestEndToEnd runs the built coordvet as a vet tool over a module that uses
// the real SDK. A finding that disappears means an analyzer no longer matches
// the SDK's names (stub drift); a new one is a false positive.
func TestEndToEnd(t *testing.T) {
	root := repoRoot(t)
	bin := buildCoordvet(t)
	dir := e2eModule(t, root)
	got, out, took := vet(t, bin, dir, "GOFLAGS=-mod=mod", "GOWORK=off")
	want := expected(t)
	if len(want) < 10 {
		t.Fatalf("only %d expectations read from testdata/e2e; the markers are broken", len(want))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("findings differ\n got: %v\nwant: %v\ngo vet output:\n%s", got, want, out)
	}
	checks := map[string]bool{}
	for _, f := range got {
		checks[string(f[strings.LastIndex(string(f), ":")+1:])] = true
	}
	for _, c := range []string{"pavedroad", "fencetoken", "forgedtoken", "efficiencydecl", "dualwrite", "sagapivot", "ignoredirective"} {
		if !checks[c] {
			t.Errorf("check %s fired nowhere against the real SDK", c)
		}
	}
	if !strings.Contains(out, "(see docs/vet.md#pavedroad)") || !strings.Contains(out, "breaks RFC MUST 3") {
		t.Errorf("diagnostics do not name the RFC rule and the docs link:\n%s", out)
	}
	t.Logf("%d findings as expected, go vet -vettool took %v", len(got), took.Round(time.Millisecond))

	// The same binary standalone (go/packages loading, tests included).
	got, out, took = runTool(t, dir, exec.Command(bin, "./..."), "GOFLAGS=-mod=mod", "GOWORK=off")
	if !slices.Equal(got, want) {
		t.Fatalf("standalone findings differ\n got: %v\nwant: %v\noutput:\n%s", got, want, out)
	}
	t.Logf("standalone coordvet ./...: same %d findings in %v", len(got), took.Round(time.Millisecond))
}

// TestRepositoryIsClean runs coordvet over the whole SDK, its examples and its
// tests, and over the bench module (which uses the raw peers on purpose): the
// paved road must not trip its own checks (no false positives).
func TestRepositoryIsClean(t *testing.T) {
	root := repoRoot(t)
	bin := buildCoordvet(t)
	for _, mod := range []string{".", "bench"} {
		dir := filepath.Join(root, mod)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			if mod == "." {
				t.Fatal(err)
			}
			continue // an optional module not in this checkout
		}
		got, out, took := vet(t, bin, dir, "GOWORK=off")
		if len(got) > 0 {
			t.Fatalf("coordvet reports %d findings in module %s:\n%s", len(got), mod, out)
		}
		t.Logf("go vet -vettool=coordvet ./... in module %s: clean in %v", mod, took.Round(time.Millisecond))
	}
}
