package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runVet builds coordvet (its own module, cmd/coordvet) and runs it as a go vet
// tool over two samples: one that commits and then publishes (a dual write), and
// its fix through the outbox. It needs the repository (and the go command).
func runVet(ctx context.Context, e *env) (string, bool) {
	dir, err := os.MkdirTemp("", "coorddemo-vet-")
	if err != nil {
		return err.Error(), false
	}
	defer os.RemoveAll(dir)
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(gomod)), "go.mod") {
		return "run the demo inside the coordkit repository (go env GOMOD found no module)", false
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	tool := filepath.Join(dir, "coordvet")
	step("building coordvet, the analyzer (its own module, cmd/coordvet: seconds after scripts/test.sh, up to a minute on a cold build cache)")
	// -race=false: the analyzer is a tool, race-instrumented it runs ten times slower.
	build := exec.CommandContext(ctx, "go", "build", "-race=false", "-o", tool, ".")
	build.Dir = filepath.Join(root, "cmd", "coordvet")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Sprintf("build coordvet: %v\n%s", err, out), false
	}
	vet := func(pkg string) (findings []string, err error) {
		cmd := exec.CommandContext(ctx, "go", "vet", "-vettool="+tool, pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, ": dualwrite: ") {
				findings = append(findings, line)
			}
		}
		if _, ok := err.(*exec.ExitError); ok {
			err = nil // go vet exits non-zero when it reports findings
		}
		return findings, err
	}
	bad, err := vet("./cmd/coorddemo/testdata/dualwrite")
	if err != nil {
		return err.Error(), false
	}
	step("go vet -vettool=coordvet ./cmd/coorddemo/testdata/dualwrite")
	for _, f := range bad {
		file, msg, _ := strings.Cut(f, ": dualwrite: ")
		head, _, _ := strings.Cut(msg, ";")
		step("  %s: %s", filepath.Base(file), head)
	}
	good, err := vet("./cmd/coorddemo/testdata/outboxfix")
	if err != nil {
		return err.Error(), false
	}
	step("go vet -vettool=coordvet ./cmd/coorddemo/testdata/outboxfix (the same order through outbox.EnqueueTx): %d findings", len(good))
	return fmt.Sprintf("dual write flagged: %d finding(s); the outbox version: %d", len(bad), len(good)), len(bad) == 1 && len(good) == 0
}
