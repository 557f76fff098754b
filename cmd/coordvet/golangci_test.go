package main

import (
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

// golangciVersion is the golangci-lint v2 the offline route is tested with.
const golangciVersion = "v2.15.0"

const gclMain = `// Command custom-gcl is golangci-lint v2 with the coordvet plugin linked in:
// what "golangci-lint custom" builds, without cloning anything.
package main

import (
	"fmt"
	"os"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	_ "github.com/coordkit/coordkit/cmd/coordvet/plugin"
)

func main() {
	info := commands.BuildInfo{Version: "%s-coordvet", Commit: "custom", Date: "(offline)", GoVersion: "go"}
	if err := commands.Execute(info); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(exitcodes.Failure)
	}
}
`

const gclConfig = `version: "2"
linters:
  default: none
  enable:
    - coordvet
  settings:
    custom:
      coordvet:
        type: module
        description: RFC-COORD-001 checks (docs/vet.md)
        settings:
          disable: []
`

// TestGolangciLintOffline builds golangci-lint with the plugin the way
// docs/vet.md#golangci-lint says — a small main importing golangci-lint v2 and
// the plugin, "go build" against the module proxy only — and runs it over the
// e2e module and the corpus (dual writes and tokens across packages, so the
// facts must flow): it must report the same lines as go vet -vettool. It compiles
// golangci-lint (minutes), so it runs only with COORDVET_GOLANGCI=1.
func TestGolangciLintOffline(t *testing.T) {
	if os.Getenv("COORDVET_GOLANGCI") != "1" {
		t.Skip("set COORDVET_GOLANGCI=1 to build golangci-lint with the plugin (slow; not in the default run)")
	}
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	gcl := t.TempDir()
	write(t, filepath.Join(gcl, "main.go"), fmt.Sprintf(gclMain, golangciVersion))
	write(t, filepath.Join(gcl, "go.mod"), fmt.Sprintf("module example.com/customgcl\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/golangci/golangci-lint/v2 %s\n\tgithub.com/coordkit/coordkit/cmd/coordvet v0.0.0-00010101000000-000000000000\n)\n\nreplace github.com/coordkit/coordkit/cmd/coordvet => %s\n", golangciVersion, here))
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	start := time.Now()
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "custom-gcl", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = gcl, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Logf("built golangci-lint %s with the coordvet plugin in %v (module proxy only)", golangciVersion, time.Since(start).Round(time.Second))

	run, dir := vetModule(t)
	write(t, filepath.Join(dir, ".golangci.yml"), gclConfig)
	cmd := exec.Command(filepath.Join(gcl, "custom-gcl"), "run", "--max-issues-per-linter=0", "--max-same-issues=0", "--uniq-by-line=false", "--output.text.path=stdout", "./e2e/...", "./corpus/...")
	cmd.Dir, cmd.Env = dir, append(env, "COORDVET_TODAY=2026-07-01")
	out, _ := cmd.CombinedOutput()
	line := regexp.MustCompile(`^((?:e2e|corpus)/[^:]+\.go):(\d+):\d+: (.*) \(coordvet\)$`)
	var got, want []string
	related := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "(related information)") {
			related++ // golangci-lint prints a related location as an issue of its own
			continue
		}
		if m := line.FindStringSubmatch(l); m != nil {
			got = append(got, m[1]+":"+m[2])
		}
	}
	if related == 0 {
		t.Errorf("no related location (the commit of the dual write) in golangci-lint's output:\n%s", out)
	}
	for _, f := range run.found {
		want = append(want, f.line()) // e2e and the corpus: helpers across packages need the facts
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("golangci-lint with the plugin reports\n %v\ngo vet -vettool reports\n %v\noutput:\n%s", got, want, out)
	}
	t.Logf("golangci-lint %s + plugin: the same %d findings as go vet -vettool", golangciVersion, len(got))
}
