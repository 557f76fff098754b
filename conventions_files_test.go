package coordkit_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Rules over every Go file of the SDK module, tests included: the size
// ceiling and the import groups (docs/architecture.md, "The rooms of a
// package").

// maxFileLines is the file-size ceiling: a file over it is split by job, or
// listed in longFiles with the reason it is not split yet.
const maxFileLines = 400

// longFiles are the files allowed over maxFileLines, each with its reason. An
// entry whose file is gone or back under the ceiling fails the test: the list
// only shrinks.
var longFiles = map[string]string{
	// The lead's watch-plane round rewrites these (membership restructuring).
	"membership/outage_test.go":                "one scenario (an etcd outage during churn) with its report; rewritten with the watch plane",
	"correctnesslease/lease_test.go":           "the lease scenarios; rewritten with the watch plane",
	"correctnesslease/pgfence/cluster_test.go": "the fenced-cluster scenario (three holders, pauses, a report): one story",
	"efficiencylock/fault_test.go":             "the fault scenarios against a real Redis (kill, pause, failover): one file per fault kind is next",
}

// moduleFile is one Go file of the SDK module, parsed with comments.
type moduleFile struct {
	path  string // slash-separated, relative to the module root
	lines int
	f     *ast.File
	fset  *token.FileSet
}

// moduleFiles parses the imports of every .go file of the SDK module under
// root (tests included; testdata, hidden directories and other modules
// excluded).
func moduleFiles(t *testing.T, root string) []moduleFile {
	return parseModuleFiles(t, root, parser.ImportsOnly, func(string) bool { return true })
}

// parseModuleFiles parses, with mode, the .go files under root that keep says.
func parseModuleFiles(t *testing.T, root string, mode parser.Mode, keep func(path string) bool) []moduleFile {
	t.Helper()
	var out []moduleFile
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || !keep(p) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, src, parser.ParseComments|mode)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, moduleFile{path: filepath.ToSlash(rel), lines: bytes.Count(src, []byte("\n")), f: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkFileSizes holds the ceiling: a file over max lines must be in allowed,
// and every entry of allowed must still be over it.
func checkFileSizes(files []moduleFile, max int, allowed map[string]string) []string {
	var bad []string
	seen := map[string]bool{}
	for _, f := range files {
		if f.lines <= max {
			continue
		}
		seen[f.path] = true
		if allowed[f.path] == "" {
			bad = append(bad, fmt.Sprintf("%s: %d lines, over the ceiling of %d: split it by job", f.path, f.lines, max))
		}
	}
	for p := range allowed {
		if !seen[p] {
			bad = append(bad, p+": listed in longFiles but not over the ceiling (or gone): remove the entry")
		}
	}
	return bad
}

// importClass orders the import groups: the standard library, then other
// modules, then this module's own packages last.
func importClass(path string) int {
	switch {
	case path == modulePath || strings.HasPrefix(path, modulePath+"/"):
		return 2
	case strings.Contains(strings.Split(path, "/")[0], "."):
		return 1
	}
	return 0
}

var importClassName = []string{"standard library", "other modules'", "the module's own"}

// checkImportGroups holds "imports are grouped, the module's own last": the
// blank-line-separated groups of a file's import block each hold one class,
// in the order standard library, other modules, this module (goimports
// -local github.com/coordkit/coordkit writes them so).
func checkImportGroups(files []moduleFile) []string {
	var bad []string
files:
	for _, mf := range files {
		prevLine, prevClass, groupClass := -1, -1, -1
		for _, is := range mf.f.Imports {
			ip, _ := strconv.Unquote(is.Path.Value)
			c := importClass(ip)
			line := mf.fset.Position(is.Pos()).Line
			if is.Doc != nil {
				line = mf.fset.Position(is.Doc.Pos()).Line
			}
			newGroup := prevLine < 0 || line > prevLine+1
			prevLine = mf.fset.Position(is.End()).Line
			switch {
			case !newGroup && c != groupClass:
				bad = append(bad, fmt.Sprintf("%s:%d: %s import %s shares a group with %s imports: one group per kind, the module's own last", mf.path, line, importClassName[c], ip, importClassName[groupClass]))
				continue files
			case newGroup && c < prevClass:
				bad = append(bad, fmt.Sprintf("%s:%d: %s import %s after a group of %s imports: standard library, other modules, the module's own last", mf.path, line, importClassName[c], ip, importClassName[prevClass]))
				continue files
			}
			if newGroup {
				groupClass = c
			}
			prevClass = max(prevClass, c)
		}
	}
	slices.Sort(bad)
	return bad
}

// TestFileSizesAndImports: the module's files keep the ceiling and the import groups.
func TestFileSizesAndImports(t *testing.T) {
	files := moduleFiles(t, ".")
	for _, v := range checkFileSizes(files, maxFileLines, longFiles) {
		t.Error(v)
	}
	for _, v := range checkImportGroups(files) {
		t.Error(v)
	}
}

// TestFileRulesCatchViolations: the fixture breaks both rules (its bad.go is
// over a ceiling of 20 lines; imports.go mixes its groups), and a stale
// allowlist entry is caught.
func TestFileRulesCatchViolations(t *testing.T) {
	files := moduleFiles(t, "testdata/conventions/badfeature")
	got := strings.Join(append(checkFileSizes(files, 20, map[string]string{"gone.go": "was long"}), checkImportGroups(files)...), "\n")
	wantCaught(t, got,
		"bad.go: 53 lines, over the ceiling of 20",
		"gone.go: listed in longFiles but not over the ceiling",
		"imports.go:7: other modules' import github.com/jackc/pgx/v5 shares a group with the module's own imports",
		"imports2.go:6: standard library import context after a group of other modules' imports",
	)
}
