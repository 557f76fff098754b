// Package vettest helps the analyzers' tests find the shared stub tree and pin
// the date exceptions are judged on, and the command's tests build it once.
package vettest

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// Today is the date the tests judge exceptions on: testdata's exceptions
// expire 2026-09-30 (valid), 2026-06-30 (past) or 2027-03-01 (too far ahead).
const Today = "2026-07-01"

// TestData pins COORDVET_TODAY to Today for the test and returns the absolute
// path of cmd/coordvet/testdata, the GOPATH-style tree of stub packages and
// test cases every analyzer test loads (testdata/src).
func TestData(t testing.TB) string {
	t.Helper()
	t.Setenv(vetutil.TodayEnv, Today)
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("vettest: cannot locate the testdata directory")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// RepoRoot returns the SDK checkout cmd/coordvet lives in.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("vettest: cannot locate the repository")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("vettest: repository root: %w", err)
	}
	return filepath.Abs(root)
}

// WriteSDKModule lays out, in dir, a module called modPath that uses the real
// SDK of this checkout through a replace directive, with the SDK's own
// requirements and checksums (so it builds from the module cache), and files
// (slash-separated paths relative to dir).
func WriteSDKModule(dir, modPath string, files map[string][]byte) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return err
	}
	mod := regexp.MustCompile(`(?m)^module .*$`).ReplaceAllString(string(gomod), "module "+modPath)
	mod += fmt.Sprintf("\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n", vetutil.SDK, vetutil.SDK, root)
	all := map[string][]byte{"go.mod": []byte(mod), "go.sum": sum}
	maps.Copy(all, files)
	for name, content := range all {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// shared are the directories that live for the whole test binary (the built
// command, a module it vets); Main removes them.
var shared []string

// SharedDir makes a directory, named after prefix, that lives for the whole
// test binary: Main removes it.
func SharedDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	shared = append(shared, dir)
	return dir, nil
}

// Main is a TestMain: it runs the tests, then removes the SharedDir directories.
func Main(m *testing.M) {
	code := m.Run()
	for _, dir := range shared {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	bin       string
	buildErr  error
)

// Coordvet builds the coordvet command, the binary users install, once per
// test binary: without -race even under scripts/test.sh (GOFLAGS=-race), as
// users build it — race-instrumented it analyses the SDK about ten times slower.
func Coordvet(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, ok := runtime.Caller(0)
		if !ok {
			buildErr = fmt.Errorf("vettest: cannot locate cmd/coordvet")
			return
		}
		dir, err := SharedDir("coordvet-bin-")
		if err != nil {
			buildErr = err
			return
		}
		bin = filepath.Join(dir, "coordvet")
		if out, err := exec.Command("go", "build", "-race=false", "-o", bin, filepath.Join(filepath.Dir(file), "..", "..")).CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bin
}
