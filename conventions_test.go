package coordkit_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
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
			case itop != top:
				bad = append(bad, where+"a feature package never imports a sibling feature package (declare an interface)")
			case !strings.HasPrefix(rel, irel+"/"):
				bad = append(bad, where+"within a package family, imports point up to an ancestor only")
			}
		}
	}
	return bad
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

// defaultClause is the "Default …" clause of a field's doc, up to its first
// '.', ':' or ';'. It states a literal when it holds a digit that is not the
// divisor of a fraction of another field ("Default LeaseTTL/3" is fine,
// "Default 30 s" is not).
var (
	defaultClause = regexp.MustCompile(`\bDefault\b[^.:;]*`)
	fraction      = regexp.MustCompile(`/\d+`)
	digit         = regexp.MustCompile(`\d`)
	namedDefault  = regexp.MustCompile(`\bDefault[A-Z]\w*`)
)

// statesLiteral reports whether doc's default clause states a literal value.
func statesLiteral(doc string) bool {
	for _, c := range defaultClause.FindAllString(doc, -1) {
		if digit.MatchString(fraction.ReplaceAllString(c, "")) {
			return true
		}
	}
	return false
}

// checkConfigs holds the Config conventions: a default stated as a value names
// the Default… constant that holds it, and that constant exists; withDefaults
// assigns no literal (its values come from the constants); a constructor calls
// withDefaults before validate; a package with a validate method reports with a
// ConfigError of its own (or of the parent package it adapts).
func checkConfigs(p *pkg, parentHasConfigError bool) []string {
	var bad []string
	declared := map[string]bool{}
	hasValidate, hasConfigError := false, false
	for _, f := range p.files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declared[n.Name] = true
						}
					case *ast.TypeSpec:
						if s.Name.Name == "ConfigError" {
							hasConfigError = true
						}
					}
				}
			case *ast.FuncDecl:
				if d.Recv != nil && d.Name.Name == "validate" {
					hasValidate = true
				}
			}
		}
	}
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok || !strings.HasSuffix(n.Name.Name, "Config") || !n.Name.IsExported() {
					return true
				}
				for _, fld := range st.Fields.List {
					doc := strings.Join(strings.Fields(fld.Doc.Text()), " ")
					if !statesLiteral(doc) {
						continue
					}
					m := namedDefault.FindAllString(doc, -1)
					if len(m) == 0 {
						bad = append(bad, where(fld)+": "+n.Name.Name+" field's default is a literal in its doc; name the Default… constant")
					}
					for _, c := range m {
						if !declared[c] && !strings.Contains(doc, "."+c) {
							bad = append(bad, where(fld)+": "+n.Name.Name+" doc names "+c+", which the package does not declare")
						}
					}
				}
			case *ast.FuncDecl:
				if n.Body == nil {
					return true
				}
				if n.Recv != nil && n.Name.Name == "withDefaults" {
					divisors := map[ast.Node]bool{} // the N of "x / N": a fraction of another field
					ast.Inspect(n.Body, func(m ast.Node) bool {
						if b, ok := m.(*ast.BinaryExpr); ok && b.Op == token.QUO {
							divisors[b.Y] = true
						}
						if lit, ok := m.(*ast.BasicLit); ok && lit.Value != "0" && lit.Value != `""` && !divisors[lit] {
							bad = append(bad, where(lit)+": withDefaults assigns the literal "+lit.Value+"; declare a Default… constant")
						}
						return true
					})
					return true
				}
				// Per receiver: withDefaults before validate.
				order := map[string][]string{}
				ast.Inspect(n.Body, func(m ast.Node) bool {
					if c, ok := m.(*ast.CallExpr); ok {
						if s, ok := c.Fun.(*ast.SelectorExpr); ok && (s.Sel.Name == "withDefaults" || s.Sel.Name == "validate") {
							recv := fmt.Sprint(s.X)
							order[recv] = append(order[recv], s.Sel.Name)
						}
					}
					return true
				})
				for _, o := range order {
					if i := slices.Index(o, "validate"); i >= 0 && slices.Contains(o[i:], "withDefaults") {
						bad = append(bad, where(n)+": "+n.Name.Name+" calls validate before withDefaults")
					}
				}
			}
			return true
		})
	}
	if hasValidate && !hasConfigError && !parentHasConfigError {
		bad = append(bad, p.dir+": validates a Config but declares no ConfigError")
	}
	return bad
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

// ---- the tests ----

// conventions runs every rule over ps and returns the violations.
func conventions(ps []*pkg) []string {
	configErr := map[string]bool{}
	for _, p := range ps {
		for _, f := range p.files {
			if f.Scope.Lookup("ConfigError") != nil {
				configErr[p.importPath] = true
			}
		}
	}
	var bad []string
	for _, p := range ps {
		bad = append(bad, checkImports(p)...)
		if !p.library() && !strings.HasPrefix(strings.TrimPrefix(p.importPath, modulePath+"/"), "testing/") {
			continue // cmd/: layering only
		}
		bad = append(bad, checkDocs(p)...)
		bad = append(bad, checkConfigs(p, configErr[path.Dir(p.importPath)])...)
		bad = append(bad, checkMigrations(p)...)
		bad = append(bad, checkDocExamples(p)...)
		bad = append(bad, checkDBVocabulary(p)...)
	}
	slices.Sort(bad)
	return bad
}

// TestConventions: the repository keeps the house rules.
func TestConventions(t *testing.T) {
	for _, v := range conventions(modulePkgs(t)) {
		t.Error(v)
	}
}

// TestConventionsCatchViolations: a fixture that breaks each rule once is caught
// once per rule — a conventions test that cannot fail holds nothing.
func TestConventionsCatchViolations(t *testing.T) {
	fixture := loadPkg(t, "testdata/conventions/badfeature", modulePath+"/badfeature")
	got := strings.Join(conventions([]*pkg{fixture}), "\n")
	for _, want := range []string{
		"imports " + modulePath + "/outbox: a feature package never imports a sibling feature package",
		"imports " + modulePath + "/testing/coordtest: only tests and cmd/ import testing/",
		"Undocumented is not documented",
		"Config field's default is a literal in its doc",
		"withDefaults assigns the literal 30",
		"New calls validate before withDefaults",
		"validates a Config but declares no ConfigError",
		"Store has 2 of Migrate, MigrateTx, MigrationSQL",
		"example discards a value: s, _ := badfeature.New(badfeature.Config{})",
		"Querier is a database handle; the vocabulary names it DBTX or Beginner",
		"SchemaVersion takes a Querier; take a DBTX or a Beginner",
		"SchemaVersion takes a Querier; it takes a DBTX in every package",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the fixture's violation %q was not caught; got:\n%s", want, got)
		}
	}
	floor := loadPkg(t, "testdata/conventions/coord", modulePath+"/coord")
	if got := strings.Join(conventions([]*pkg{floor}), "\n"); !strings.Contains(got, "coord is the floor: standard library only") {
		t.Errorf("coord importing a driver was not caught; got:\n%s", got)
	}
}
