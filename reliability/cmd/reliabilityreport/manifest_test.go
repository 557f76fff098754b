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
		var stack []ast.Node // the enclosing nodes, for the range a name is built in
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
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
			names := scenarioNames(call.Args[1], stack)
			if names == nil {
				t.Errorf("%s: coordtest.NewResult's scenario name must be a string literal, or \"literal\"+v with v ranging over a []string literal", fset.Position(call.Pos()))
				return true
			}
			for _, name := range names {
				s := scenario{filepath.ToSlash(rel), name}
				if prev, dup := inSource[s]; dup {
					t.Errorf("%s: scenario %v already started at %s", fset.Position(call.Pos()), s, prev)
				}
				inSource[s] = fset.Position(call.Pos()).String()
			}
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

// scenarioNames returns the names a NewResult name argument takes: a string
// literal, or "literal" + v where v is the value of an enclosing range over a
// []string literal (a table of variants). Anything else returns nil.
func scenarioNames(arg ast.Expr, stack []ast.Node) []string {
	if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		s, _ := strconv.Unquote(lit.Value)
		return []string{s}
	}
	bin, ok := arg.(*ast.BinaryExpr)
	if !ok || bin.Op != token.ADD {
		return nil
	}
	lit, ok1 := bin.X.(*ast.BasicLit)
	v, ok2 := bin.Y.(*ast.Ident)
	if !ok1 || !ok2 || lit.Kind != token.STRING {
		return nil
	}
	prefix, _ := strconv.Unquote(lit.Value)
	for i := len(stack) - 1; i >= 0; i-- {
		r, ok := stack[i].(*ast.RangeStmt)
		if !ok {
			continue
		}
		if val, ok := r.Value.(*ast.Ident); !ok || val.Name != v.Name {
			continue
		}
		table, ok := r.X.(*ast.CompositeLit)
		if !ok {
			return nil
		}
		var names []string
		for _, e := range table.Elts {
			el, ok := e.(*ast.BasicLit)
			if !ok || el.Kind != token.STRING {
				return nil
			}
			s, _ := strconv.Unquote(el.Value)
			names = append(names, prefix+s)
		}
		return names
	}
	return nil
}
