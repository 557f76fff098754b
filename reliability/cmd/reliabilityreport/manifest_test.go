package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// TestManifestMatchesTheScenarios: every coordtest.NewResult call in the
// repository's tests is listed in reliability/scenarios.tsv and every listed
// scenario exists, so a new or renamed scenario cannot leave the manifest behind
// (the full run would then be refused, far later).
func TestManifestMatchesTheScenarios(t *testing.T) {
	manifest, err := readManifest(filepath.Join(repoRoot, "reliability", "scenarios.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	inSource := map[scenario]string{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && path != repoRoot)) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, filepath.Dir(path))
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "NewResult" || len(call.Args) < 2 {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "coordtest" {
				return true
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: coordtest.NewResult with a scenario name that is not a string literal", fset.Position(call.Pos()))
				return true
			}
			name, _ := strconv.Unquote(lit.Value)
			s := scenario{filepath.ToSlash(rel), name}
			if prev, dup := inSource[s]; dup {
				t.Errorf("%s: scenario %v already started at %s", fset.Position(call.Pos()), s, prev)
			}
			inSource[s] = fset.Position(call.Pos()).String()
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inSource) == 0 {
		t.Fatal("found no coordtest.NewResult call: the walk is broken")
	}
	for s, at := range inSource {
		if _, ok := manifest[s]; !ok {
			t.Errorf("%s: scenario %v is not in reliability/scenarios.tsv", at, s)
		}
	}
	for s := range manifest {
		if _, ok := inSource[s]; !ok {
			t.Errorf("reliability/scenarios.tsv lists %v, which no test starts", s)
		}
	}
	t.Logf("%d scenarios in the source and the manifest", len(inSource))
}
