package coordkit_test

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// One of each test helper (docs/architecture.md, "Tests"): the helpers every
// package needs live in testing/coordtest, and a test file does not write its
// own. Held mechanically where it can be: by name, and by the way servers are
// reached.

// sharedHelpers are helper names a test file may not declare, with the
// coordtest helper to call instead.
var sharedHelpers = map[string]string{
	"waitFor":        "coordtest.Until",
	"waitUntil":      "coordtest.Until",
	"eventually":     "coordtest.Until",
	"testLogger":     "coordtest.Logger",
	"testTenant":     "coordtest.Tenant",
	"countingClient": "coordtest.CountingEtcdClient",
}

// ownHelpersAllowed lists the files that still have their own copies, with
// the reason; an entry whose file no longer needs it fails the test. Empty
// since the last packages' tests moved onto testing/coordtest (issue 32
// point 5).
var ownHelpersAllowed = map[string]string{}

// checkTestHelpers holds the rule over test files: no declaration of a shared
// helper's name, no server reached around coordtest (os.Getenv of a
// COORD_TEST_* server URL, coordtest.StartEtcd: examples call
// coordtest.ExamplePostgres, ExampleEtcd, ExampleRedis, ExampleNATSURL), no
// parsing of deploy/prometheus/alerts.yaml by hand (coordtest.AlertRules).
func checkTestHelpers(files []moduleFile, allowed map[string]string) []string {
	var bad []string
	flagged := map[string]bool{}
	for _, mf := range files {
		if strings.HasPrefix(mf.path, "testing/coordtest/") || strings.HasPrefix(mf.path, "deploy/") {
			continue // the helpers themselves; deploy/ validates its rule files strictly
		}
		var here []string
		for _, d := range mf.f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && sharedHelpers[fd.Name.Name] != "" {
				here = append(here, fmt.Sprintf("%s:%d: declares %s: call %s", mf.path, mf.fset.Position(fd.Pos()).Line, fd.Name.Name, sharedHelpers[fd.Name.Name]))
			}
		}
		selectorCalls(mf.f, func(call *ast.CallExpr, sel *ast.SelectorExpr) {
			pkgName := fmt.Sprint(sel.X)
			switch {
			case pkgName == "os" && sel.Sel.Name == "Getenv" && len(call.Args) == 1:
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					if strings.HasPrefix(v, "COORD_TEST_") && strings.HasSuffix(v, "_URL") || strings.HasPrefix(v, "COORD_EXAMPLE_") {
						here = append(here, fmt.Sprintf("%s:%d: reads %s: reach servers through testing/coordtest", mf.path, mf.fset.Position(call.Pos()).Line, v))
					}
				}
			case pkgName == "os" && sel.Sel.Name == "ReadFile" && len(call.Args) == 1:
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && strings.HasSuffix(lit.Value, `alerts.yaml"`) {
					here = append(here, fmt.Sprintf("%s:%d: reads the alert rules itself: call coordtest.AlertRules", mf.path, mf.fset.Position(call.Pos()).Line))
				}
			case pkgName == "coordtest" && sel.Sel.Name == "StartEtcd":
				here = append(here, fmt.Sprintf("%s:%d: calls coordtest.StartEtcd: a test calls coordtest.Etcd, an example coordtest.ExampleEtcd", mf.path, mf.fset.Position(call.Pos()).Line))
			}
		})
		if len(here) > 0 {
			flagged[mf.path] = true
			if allowed[mf.path] == "" {
				bad = append(bad, here...)
			}
		}
	}
	for p := range allowed {
		if !flagged[p] {
			bad = append(bad, p+": listed in ownHelpersAllowed but has no helper of its own left: remove the entry")
		}
	}
	slices.Sort(bad)
	return bad
}

// testFiles parses every _test.go file of the SDK module under root.
func testFiles(t *testing.T, root string) []moduleFile {
	return parseModuleFiles(t, root, 0, func(p string) bool { return strings.HasSuffix(p, "_test.go") })
}

// TestTestHelpers: the module's tests use testing/coordtest's helpers.
func TestTestHelpers(t *testing.T) {
	for _, v := range checkTestHelpers(testFiles(t, "."), ownHelpersAllowed) {
		t.Error(v)
	}
}

// TestTestHelpersCatchViolations: the fixture declares its own waitFor and
// testLogger, reads a server URL and starts its own etcd; a stale allowlist
// entry is caught.
func TestTestHelpersCatchViolations(t *testing.T) {
	got := strings.Join(checkTestHelpers(testFiles(t, "testdata/conventions/badfeature"), map[string]string{"gone_test.go": "was here"}), "\n")
	wantCaught(t, got,
		"helpers_test.go:11: declares waitFor: call coordtest.Until",
		"helpers_test.go:22: declares testLogger: call coordtest.Logger",
		"helpers_test.go:27: reads COORD_TEST_POSTGRES_URL: reach servers through testing/coordtest",
		"helpers_test.go:31: calls coordtest.StartEtcd",
		"helpers_test.go:36: reads the alert rules itself: call coordtest.AlertRules",
		"gone_test.go: listed in ownHelpersAllowed but has no helper of its own left",
	)
}
