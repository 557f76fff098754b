package coordkit_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The house rules that can be held mechanically (docs/architecture.md says why
// each exists). Every check runs over a parsed package and returns its
// violations, so the same code checks the repository (none allowed) and a
// fixture that breaks each rule (each must be caught).

const modulePath = "github.com/coordkit/coordkit"

// pkg is one package of the module, parsed with comments, test files excluded.
type pkg struct {
	dir        string // relative to the module root
	importPath string
	name       string
	files      map[string]*ast.File // by base name
	fset       *token.FileSet
}

func loadPkg(t *testing.T, dir, importPath string) *pkg {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &pkg{dir: dir, importPath: importPath, files: map[string]*ast.File{}, fset: token.NewFileSet()}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		p.name = f.Name.Name
		p.files[e.Name()] = f
	}
	return p
}

// modulePkgs loads every package of the SDK module (cmd/ included for the
// import rules; other modules and testdata excluded).
func modulePkgs(t *testing.T) []*pkg {
	t.Helper()
	var out []*pkg
	for _, dir := range moduleDirs(t) {
		ip := modulePath
		if dir != "." {
			ip += "/" + filepath.ToSlash(dir)
		}
		out = append(out, loadPkg(t, dir, ip))
	}
	return out
}

func moduleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if dir := filepath.Dir(p); strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") && !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// library reports whether p is SDK library code (not cmd/, not the test helpers).
func (p *pkg) library() bool {
	rel := strings.TrimPrefix(p.importPath, modulePath+"/")
	return !strings.HasPrefix(rel, "cmd/") && !strings.HasPrefix(rel, "testing/")
}

// ---- the rules ----

// composes lists the composite packages, one layer above the features they are
// made of (docs/architecture.md): ownership's members are correctnesslease
// sessions and its partitions correctnesslease leases, its member keys are
// membership records; schedule's jobs hash onto ownership partitions and each
// fire is fenced by pgfence with its partition's token. Nothing imports a
// composite package but a composite made of it.
var composes = map[string][]string{
	"ownership": {"correctnesslease", "membership"},
	"schedule":  {"ownership", "correctnesslease"},
}

// checkImports holds the layering of docs/architecture.md: coord imports only the
// standard library; internal/ imports only coord and internal/; a feature package
// imports coord, internal/ and (from a subpackage) its own ancestors — never a
// sibling feature, never one of its own subpackages; only tests and cmd/ import
// testing/.
func checkImports(p *pkg) []string {
	rel := strings.TrimPrefix(p.importPath, modulePath+"/")
	top := strings.Split(rel, "/")[0]
	var bad []string
	for name, f := range p.files {
		for _, is := range f.Imports {
			ip, _ := strconv.Unquote(is.Path.Value)
			where := p.dir + "/" + name + ": imports " + ip + ": "
			ours := ip == modulePath || strings.HasPrefix(ip, modulePath+"/")
			if rel == "coord" {
				if strings.Contains(strings.Split(ip, "/")[0], ".") {
					bad = append(bad, where+"coord is the floor: standard library only")
				}
				continue
			}
			if !ours {
				continue
			}
			irel := strings.TrimPrefix(ip, modulePath+"/")
			itop := strings.Split(irel, "/")[0]
			switch {
			case itop == "testing" && top != "testing" && top != "cmd":
				bad = append(bad, where+"only tests and cmd/ import testing/")
			case top == "cmd" || top == "testing":
			case top == "internal" && itop != "coord" && itop != "internal":
				bad = append(bad, where+"internal/ imports only coord and internal/")
			case itop == "coord" || itop == "internal":
			case itop != top && slices.Contains(composes[top], itop):
			case itop != top && composes[itop] != nil:
				bad = append(bad, where+"nothing imports a composite package but a composite made of it (composes in conventions_test.go)")
			case itop != top:
				bad = append(bad, where+"a feature package never imports a sibling feature package: declare an interface it satisfies, or, if this package is made of it, make this package a composite (add it to composes in conventions_test.go; docs/architecture.md, Adding a package)")
			case !strings.HasPrefix(rel, irel+"/"):
				bad = append(bad, where+"within a package family, imports point up to an ancestor only")
			}
		}
	}
	return bad
}

// selectorCalls calls visit with every call of a selector, x.Name(…), under n.
func selectorCalls(n ast.Node, visit func(call *ast.CallExpr, sel *ast.SelectorExpr)) {
	ast.Inspect(n, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				visit(call, sel)
			}
		}
		return true
	})
}

// checkDocs holds "every exported name is documented": functions, methods of
// exported types, types, and constants and variables (a group's comment counts).
func checkDocs(p *pkg) []string {
	var bad []string
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Doc != nil {
					continue
				}
				if d.Recv != nil && !exportedRecv(d.Recv) {
					continue
				}
				bad = append(bad, where(d)+": "+d.Name.Name+" is not documented")
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
							bad = append(bad, where(s)+": type "+s.Name.Name+" is not documented")
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
								bad = append(bad, where(s)+": "+n.Name+" is not documented")
							}
						}
					}
				}
			}
		}
	}
	return bad
}

func exportedRecv(r *ast.FieldList) bool {
	t := r.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.IsExported()
		default:
			return true
		}
	}
}

// checkMigrations holds "every Postgres package exposes Migrate, MigrateTx and
// MigrationSQL": a package shipping a migrations/ directory has a type with all
// three, and no type has one without the others.
func checkMigrations(p *pkg) []string {
	if st, err := os.Stat(filepath.Join(p.dir, "migrations")); err != nil || !st.IsDir() {
		return nil
	}
	methods := map[string]map[string]bool{} // receiver type -> methods
	for _, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil {
				continue
			}
			recv := recvName(fd.Recv)
			if methods[recv] == nil {
				methods[recv] = map[string]bool{}
			}
			methods[recv][fd.Name.Name] = true
		}
	}
	want := []string{"Migrate", "MigrateTx", "MigrationSQL"}
	var bad []string
	complete := 0
	for recv, ms := range methods {
		n := 0
		for _, w := range want {
			if ms[w] {
				n++
			}
		}
		switch {
		case n == len(want):
			complete++
		case n > 0:
			bad = append(bad, fmt.Sprintf("%s: %s has %d of Migrate, MigrateTx, MigrationSQL", p.dir, recv, n))
		}
	}
	if complete == 0 {
		bad = append(bad, p.dir+": ships migrations/ but no type has Migrate, MigrateTx and MigrationSQL")
	}
	return bad
}

func recvName(r *ast.FieldList) string {
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if i, ok := t.(*ast.Ident); ok {
		return i.Name
	}
	return fmt.Sprint(t)
}

// discarded matches an example line that assigns its last result to the blank
// identifier ("x, _ := f()", "_ = f()"): by Go's convention that is an error,
// dropped in an example a reader will copy. "_, err := f()" keeps the error.
var discarded = regexp.MustCompile(`(^|[\s(,])_\s*:?=[^=]`)

// checkDocExamples holds "doc.go examples do not discard errors".
func checkDocExamples(p *pkg) []string {
	f := p.files["doc.go"]
	if f == nil || f.Doc == nil {
		return nil
	}
	var bad []string
	for _, c := range f.Doc.List {
		line := strings.TrimPrefix(c.Text, "//")
		if !strings.HasPrefix(line, "\t") { // example code is indented
			continue
		}
		if code, _, _ := strings.Cut(line, "//"); discarded.MatchString(code) {
			bad = append(bad, fmt.Sprintf("%s/doc.go:%d: example discards a value: %s", p.dir, p.fset.Position(c.Pos()).Line, strings.TrimSpace(line)))
		}
	}
	return bad
}
