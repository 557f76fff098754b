package coordkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// One admin verb set (docs/architecture.md, "Admin verbs"): the operator-facing
// reads of every package have river's shape. A read of one object is
// <Noun>Get returning (T, error), an absent object being an error that matches
// the package's ErrNotFound (errors.Is), never (T, ok, error) or a zero T; a read
// of many is <Noun>List; no synonyms (Inspect, Snapshot, Groups, Services, ...)
// and no bare Get or List, whose noun the reader would have to guess. Deprecated
// names are exempt: they point at their replacement.

// adminPackages are the packages with an operator-facing read or admin surface
// (coordctl is their consumer). failstatic is not one: its one operator read is
// a local file (ReadStateFile), not an object in a store.
var adminPackages = []string{"saga", "outbox", "correctnesslease", "correctnesslease/pgfence", "idempotency", "membership", "ownership", "schedule"}

// notAdminReads are exported functions of those packages that return
// (T, bool, error) on purpose: request-path calls whose "no" is the common
// case, not an operator's lookup of an object.
var notAdminReads = map[string]string{
	"idempotency.(*Store).Lookup": "the request path's replay check: a key never seen is the usual answer, not an error",
}

// readSynonyms are names the verb set replaces: exact names, and verbs that
// start a name.
// (An aggregate report, such as outbox.Status, is not a read of objects and
// keeps its name.)
var (
	readSynonymNames = []string{"Get", "List", "Parked", "Groups", "Services", "Resets", "Summary"}
	readSynonymVerbs = []string{"Inspect", "Snapshot", "Find", "Fetch", "Describe", "Show"}
	errNotFoundIdent = "ErrNotFound"
)

// adminFile is one parsed non-test file of a package.
type adminFile struct {
	name string
	f    *ast.File
}

func parseAdminPkg(t *testing.T, dir string) (string, []adminFile) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var name string
	var files []adminFile
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		name = f.Name.Name
		files = append(files, adminFile{e.Name(), f})
	}
	return name, files
}

// deprecated reports whether a doc comment has a "Deprecated: " paragraph.
func deprecated(doc *ast.CommentGroup) bool {
	if doc == nil {
		return false
	}
	text := doc.Text()
	return strings.HasPrefix(text, "Deprecated: ") || strings.Contains(text, "\nDeprecated: ")
}

// typeString renders a result type for the messages and the bool/error tests.
func typeString(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.StarExpr:
		return "*" + typeString(x.X)
	case *ast.SelectorExpr:
		return typeString(x.X) + "." + x.Sel.Name
	case *ast.ArrayType:
		return "[]" + typeString(x.Elt)
	case *ast.MapType:
		return "map[" + typeString(x.Key) + "]" + typeString(x.Value)
	case *ast.IndexExpr:
		return typeString(x.X) + "[" + typeString(x.Index) + "]"
	}
	return "?"
}

func results(ft *ast.FuncType) []string {
	var out []string
	if ft.Results == nil {
		return nil
	}
	for _, f := range ft.Results.List {
		n := max(1, len(f.Names))
		for range n {
			out = append(out, typeString(f.Type))
		}
	}
	return out
}

// checkAdminVerbs returns the violations of the verb set in one package, named
// pkgName, made of files.
func checkAdminVerbs(pkgName string, files []adminFile) []string {
	var out []string
	hasNotFound := false
	for _, af := range files {
		for _, d := range af.f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if n.Name == errNotFoundIdent {
						hasNotFound = true
					}
				}
			}
		}
	}
	if !hasNotFound {
		out = append(out, pkgName+": declares no ErrNotFound: an absent object is an error matching it (errors.Is)")
	}
	for _, af := range files {
		for _, d := range af.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || deprecated(fd.Doc) {
				continue
			}
			where := pkgName + "." + fd.Name.Name
			if fd.Recv != nil {
				recv := typeString(fd.Recv.List[0].Type)
				if !ast.IsExported(strings.TrimPrefix(recv, "*")) {
					continue
				}
				where = pkgName + ".(" + recv + ")." + fd.Name.Name
			}
			where += " (" + af.name + ")"
			name := fd.Name.Name
			res := results(fd.Type)
			key := strings.Split(where, " ")[0]
			if _, ok := notAdminReads[key]; !ok && len(res) == 3 && res[1] == "bool" && res[2] == "error" {
				out = append(out, where+": returns (T, bool, error): an absent object is an error matching ErrNotFound, with the verb <Noun>Get")
			}
			switch {
			case slices.Contains(readSynonymNames, name):
				out = append(out, where+": "+name+" is not a verb of the set: <Noun>Get for one object, <Noun>List for many")
				continue
			case slices.ContainsFunc(readSynonymVerbs, func(v string) bool { return strings.HasPrefix(name, v) }):
				out = append(out, where+": "+name+" reads with a synonym: <Noun>Get for one object, <Noun>List for many")
				continue
			}
			switch {
			case strings.HasSuffix(name, "Get"):
				if len(res) != 2 || res[1] != "error" || res[0] == "bool" {
					out = append(out, where+": a <Noun>Get returns (T, error); got ("+strings.Join(res, ", ")+")")
				}
				if fd.Doc == nil || !strings.Contains(fd.Doc.Text(), errNotFoundIdent) {
					out = append(out, where+": its doc does not say that an absent object is ErrNotFound")
				}
			case strings.HasSuffix(name, "List"):
				if len(res) < 2 || res[len(res)-1] != "error" || slices.Contains(res, "bool") {
					out = append(out, where+": a <Noun>List returns (T, error); got ("+strings.Join(res, ", ")+")")
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestAdminVerbs(t *testing.T) {
	for _, dir := range adminPackages {
		name, files := parseAdminPkg(t, dir)
		if len(files) == 0 {
			t.Fatalf("%s: no Go files: is adminPackages out of date?", dir)
		}
		for _, v := range checkAdminVerbs(name, files) {
			t.Error(v)
		}
	}
}

// TestAdminVerbsCatchViolations: a fixture that breaks each rule is caught — a
// check that cannot fail holds nothing — and its deprecated names are not.
func TestAdminVerbsCatchViolations(t *testing.T) {
	name, files := parseAdminPkg(t, "testdata/adminverbs/bad")
	got := checkAdminVerbs(name, files)
	text := strings.Join(got, "\n")
	wantCaught(t, text,
		"bad: declares no ErrNotFound",
		"bad.(*Store).Get (bad.go): Get is not a verb of the set",
		"bad.(*Store).RowGet (bad.go): returns (T, bool, error)",
		"bad.(*Store).RowGet (bad.go): a <Noun>Get returns (T, error); got (Row, bool, error)",
		"bad.(*Store).ItemGet (bad.go): its doc does not say that an absent object is ErrNotFound",
		"bad.(*Store).Inspect (bad.go): Inspect reads with a synonym",
		"bad.Services (bad.go): Services is not a verb of the set",
		"bad.(*Store).RowList (bad.go): returns (T, bool, error)",
		"bad.(*Store).RowList (bad.go): a <Noun>List returns (T, error)",
		"bad.(*Store).Peek (bad.go): returns (T, bool, error)",
	)
	for _, exempt := range []string{"Snapshot", "GoodGet", "GoodList", "unexported"} {
		if strings.Contains(text, exempt) {
			t.Errorf("%s was reported (deprecated, well-formed or unexported names are not); got:\n%s", exempt, text)
		}
	}
	if len(got) != 10 {
		t.Errorf("got %d violations, want the fixture's 10:\n%s", len(got), text)
	}
}
