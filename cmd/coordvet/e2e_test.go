package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

func TestMain(m *testing.M) { vettest.Main(m) }

// e2eModule lays out a temporary module over the real SDK (vettest.WriteSDKModule)
// with testdata/e2e as e2e/... and testdata/corpus as corpus/....
func e2eModule(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string][]byte{}
	for _, tree := range []string{"e2e", "corpus"} {
		err := filepath.WalkDir(filepath.Join("testdata", tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			rel, _ := filepath.Rel("testdata", path)
			b, err := os.ReadFile(path)
			files[filepath.ToSlash(rel)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := vettest.WriteSDKModule(dir, "example.com/coordvete2e", files); err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t testing.TB, path, content string) {
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

func (f finding) file() string  { return string(f[:strings.Index(string(f), ":")]) }
func (f finding) check() string { return string(f[strings.LastIndex(string(f), ":")+1:]) }
func (f finding) line() string  { return string(f[:strings.LastIndex(string(f), ":")]) }

var diagLine = regexp.MustCompile(`^(?:\./)?([^:\s]+\.go):(\d+):\d+: (pavedroad|fencetoken|forgedtoken|efficiencydecl|dualwrite|sagapivot|schedulefire|ignoredirective): (.*)$`)

// vetRun is one go vet -vettool run over a module: its findings, whole
// output and duration.
type vetRun struct {
	found    []finding
	messages []string
	out      string
	took     time.Duration
}

// runTool runs cmd in dir and collects the coordvet findings it prints, with
// file names relative to dir.
func runTool(t testing.TB, dir string, cmd *exec.Cmd, env ...string) vetRun {
	t.Helper()
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := vetRun{out: string(out), took: time.Since(start)}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := diagLine.FindStringSubmatch(sc.Text()); m != nil {
			file := m[1]
			if rel, err := filepath.Rel(dir, file); err == nil && filepath.IsAbs(file) {
				file = rel
			}
			r.found = append(r.found, finding(filepath.ToSlash(file)+":"+m[2]+":"+m[3]))
			r.messages = append(r.messages, m[3]+": "+m[4])
		}
	}
	if err != nil && len(r.found) == 0 {
		t.Fatalf("%s failed without a coordvet finding: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	// Anything else in the output (a type error after an SDK API change, a
	// panic) fails loudly instead of passing as "fewer findings".
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" || strings.HasPrefix(line, "# ") || strings.Contains(line, ": \t") || diagLine.MatchString(line) {
			continue
		}
		t.Fatalf("%s printed something that is not a coordvet finding (an SDK API change? update testdata):\n%s\n\nwhole output:\n%s", strings.Join(cmd.Args, " "), line, out)
	}
	slices.Sort(r.found)
	return r
}

var (
	moduleOnce sync.Once
	moduleRun  vetRun
	moduleDir  string
)

// vetModule vets the e2e and corpus module once per test binary run, with
// -today pinned so the corpus's exceptions are judged on a fixed date.
func vetModule(t *testing.T) (vetRun, string) {
	t.Helper()
	bin := vettest.Coordvet(t)
	moduleOnce.Do(func() {
		moduleDir = e2eModule(&onceTB{t})
		moduleRun = runTool(t, moduleDir, exec.Command("go", "vet", "-vettool="+bin, "-today="+vettest.Today, "./..."), modMod(), "GOWORK=off")
	})
	if moduleDir == "" {
		t.Fatal("the e2e module could not be vetted (see the first test that tried)")
	}
	return moduleRun, moduleDir
}

// onceTB keeps the module of the first test alive for the whole run.
type onceTB struct{ *testing.T }

func (o *onceTB) TempDir() string {
	dir, err := vettest.SharedDir("coordvet-module-")
	if err != nil {
		o.Fatal(err)
	}
	return dir
}

// markers reads "<tag> check ..." comments under testdata/<tree>: the
// findings expected on their lines.
func markers(t *testing.T, tree, tag string) []finding {
	t.Helper()
	var want []finding
	err := filepath.WalkDir(filepath.Join("testdata", tree), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("testdata", path)
		for i, line := range strings.Split(string(src), "\n") {
			_, marker, ok := strings.Cut(line, tag)
			if !ok {
				continue
			}
			for _, check := range strings.Fields(marker) {
				want = append(want, finding(fmt.Sprintf("%s:%d:%s", filepath.ToSlash(rel), i+1, check)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	return want
}

// TestEndToEnd runs the built coordvet as a vet tool over a module that uses
// the real SDK. A finding that disappears means an analyzer no longer matches
// the SDK's names (stub drift); a new one is a false positive.
func TestEndToEnd(t *testing.T) {
	run, dir := vetModule(t)
	var got []finding
	for _, f := range run.found {
		if strings.HasPrefix(f.file(), "e2e/") {
			got = append(got, f)
		}
	}
	want := markers(t, "e2e", "// e2e: ")
	if len(want) < 10 {
		t.Fatalf("only %d expectations read from testdata/e2e; the markers are broken", len(want))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("findings differ\n got: %v\nwant: %v\ngo vet output:\n%s", got, want, run.out)
	}
	checks := map[string]bool{}
	for _, f := range got {
		checks[f.check()] = true
	}
	for _, c := range append(vetutil.CheckNames(), "ignoredirective") {
		if !checks[c] {
			t.Errorf("check %s fired nowhere against the real SDK", c)
		}
	}
	for _, m := range run.messages {
		if n := len([]rune(m)); n > vetutil.MaxMessage {
			t.Errorf("message of %d characters (limit %d): %s", n, vetutil.MaxMessage, m)
		}
		if !strings.Contains(m, "(RFC ") {
			t.Errorf("message does not name its RFC rule: %s", m)
		}
	}
	t.Logf("%d findings as expected, go vet -vettool over e2e+corpus took %v", len(got), run.took.Round(time.Millisecond))

	// The same binary standalone (go/packages loading, tests included).
	bin := vettest.Coordvet(t)
	alone := runTool(t, dir, exec.Command(bin, "-today="+vettest.Today, "./e2e/..."), modMod(), "GOWORK=off")
	if !slices.Equal(alone.found, want) {
		t.Fatalf("standalone findings differ\n got: %v\nwant: %v\noutput:\n%s", alone.found, want, alone.out)
	}
	t.Logf("standalone coordvet ./e2e/...: same %d findings in %v", len(alone.found), alone.took.Round(time.Millisecond))
}

// TestCorpus measures coordvet on the fixture corpus (testdata/corpus, real SDK
// and drivers): recall over the marked cases and false findings per corrected
// negative case. Targets: recall ≥ 95 %, ≤ 1 false finding per 20 negatives.
func TestCorpus(t *testing.T) {
	run, _ := vetModule(t)
	want := markers(t, "corpus", "// corpus: ")
	negatives := 0
	filepath.WalkDir(filepath.Join("testdata", "corpus"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") {
			b, _ := os.ReadFile(path)
			negatives += strings.Count(string(b), "//corpus:negative\n")
		}
		return nil
	})
	got := map[finding]bool{}
	for _, f := range run.found {
		if strings.HasPrefix(f.file(), "corpus/") {
			got[f] = true
		}
	}
	expected := map[finding]bool{}
	found, perCheck := 0, map[string][2]int{}
	for _, w := range want {
		expected[w] = true
		c := perCheck[w.check()]
		c[1]++
		if got[w] {
			found++
			c[0]++
		} else {
			t.Logf("missed: %s", w)
		}
		perCheck[w.check()] = c
	}
	var false_ []finding
	for f := range got {
		if !expected[f] {
			false_ = append(false_, f)
		}
	}
	slices.Sort(false_)
	for _, f := range false_ {
		t.Logf("false finding: %s", f)
	}
	if len(want) < 30 || negatives < len(want) {
		t.Fatalf("corpus too small: %d positive cases, %d negatives (want ≥ 30 and at least as many negatives)", len(want), negatives)
	}
	recall := float64(found) / float64(len(want))
	falseRate := float64(len(false_)) / float64(negatives)
	var checks []string
	for c, n := range perCheck {
		checks = append(checks, fmt.Sprintf("%s %d/%d", c, n[0], n[1]))
	}
	slices.Sort(checks)
	t.Logf("corpus: recall %d/%d = %.1f %%; false findings %d over %d negative cases = %.3f per negative (%s)",
		found, len(want), 100*recall, len(false_), negatives, falseRate, strings.Join(checks, ", "))
	if recall < 0.95 {
		t.Errorf("recall %.1f %% < 95 %%", 100*recall)
	}
	if falseRate > 1.0/20 {
		t.Errorf("%.3f false findings per negative > 1 per 20", falseRate)
	}
}

// TestRepositoryIsClean runs coordvet over the whole SDK, its examples and its
// tests, and over the bench module (which uses the raw peers on purpose): the
// paved road must not trip its own checks (no false positives). New packages
// need nothing here: the whole module is vetted.
func TestRepositoryIsClean(t *testing.T) {
	root, err := vettest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := vettest.Coordvet(t)
	for _, mod := range []string{".", "bench"} {
		dir := filepath.Join(root, mod)
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			if mod == "." {
				t.Fatal(err)
			}
			continue // an optional module not in this checkout
		}
		r := runTool(t, dir, exec.Command("go", "vet", "-vettool="+bin, "./..."), "GOWORK=off")
		if len(r.found) > 0 {
			t.Fatalf("coordvet reports %d findings in module %s:\n%s", len(r.found), mod, r.out)
		}
		t.Logf("go vet -vettool=coordvet ./... in module %s: clean in %v", mod, r.took.Round(time.Millisecond))
	}
}

// TestVetCacheSeesExpiry: go vet caches a package's result by the tool's
// -V=full build ID and the flags, not the environment. The build ID carries
// the date exceptions are judged on, so the same vet command run on a later
// COORDVET_TODAY reports an exception that expired in between instead of
// replaying the cached verdict.
func TestVetCacheSeesExpiry(t *testing.T) {
	_, dir := vetModule(t)
	bin := vettest.Coordvet(t)
	vetOn := func(day string) vetRun {
		return runTool(t, dir, exec.Command("go", "vet", "-vettool="+bin, "./corpus/exceptions"), modMod(), "GOWORK=off", "COORDVET_TODAY="+day)
	}
	has := func(r vetRun, f finding) bool { return slices.Contains(r.found, f) }
	valid := finding("corpus/exceptions/exceptions.go:19:ignoredirective") // expires=2026-09-30
	before := vetOn("2026-09-30")
	again := vetOn("2026-09-30") // a cache hit: same verdict
	after := vetOn("2026-10-01")
	if has(before, valid) || has(again, valid) {
		t.Fatalf("the exception is reported before it expired:\n%s", before.out)
	}
	if !has(after, valid) {
		t.Fatalf("vet replayed the cached verdict: the exception that expired on 2026-09-30 is not reported on 2026-10-01\n%s", after.out)
	}
	id := func(day string) string {
		cmd := exec.Command(bin, "-V=full")
		cmd.Env = append(os.Environ(), "COORDVET_TODAY="+day)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out[strings.LastIndex(string(out), "buildID="):])
	}
	if first, second, next := id("2026-09-30"), id("2026-09-30"), id("2026-10-01"); first != second || first == next {
		t.Fatal("-V=full's build ID does not follow the date exceptions are judged on")
	}
}

// modMod is GOFLAGS with -mod=mod added to the caller's flags, not replacing
// them: under scripts/test.sh (GOFLAGS=-race) the e2e module then reuses the
// race-instrumented build of the SDK instead of compiling it all again.
func modMod() string {
	return "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod")
}
