package coordkit_test

import (
	"fmt"
	"go/ast"
	"slices"
	"strings"
)

// dbHandles is the database vocabulary of docs/architecture.md: a database
// handle is one of these interfaces, by these names, with these methods
// (declared once in internal/pgtx, re-declared by alias in each package).
var dbHandles = map[string][]string{
	"DBTX":     {"Exec", "Query", "QueryRow"},
	"Beginner": {"Begin"},
}

// dbMethods are the methods that make an interface a database handle.
var dbMethods = []string{"Begin", "BeginTx", "CopyFrom", "Exec", "Query", "QueryRow", "SendBatch"}

// checkDBVocabulary holds "one database vocabulary": an exported interface with
// database methods is DBTX or Beginner, with exactly their methods (an alias
// keeps its target's name); an exported function takes no other handle
// interface; SchemaVersion takes a DBTX and Migrate a Beginner. A type marked
// "Deprecated:" may keep an old name, but no function takes it.
func checkDBVocabulary(p *pkg) []string {
	var bad []string
	other := map[string]bool{} // handle interfaces of the package under another name
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				ts, ok := s.(*ast.TypeSpec)
				if !ok || !ts.Name.IsExported() {
					continue
				}
				deprecated := strings.Contains(gd.Doc.Text()+ts.Doc.Text(), "Deprecated:")
				var want string
				switch t := ts.Type.(type) {
				case *ast.InterfaceType:
					methods := handleMethods(t)
					if len(methods) == 0 {
						continue
					}
					for n, ms := range dbHandles {
						if slices.Equal(ms, methods) {
							want = n
						}
					}
					if want == "" {
						want = "DBTX or Beginner"
					}
				case *ast.SelectorExpr:
					if _, ok := dbHandles[t.Sel.Name]; ok && ts.Assign.IsValid() {
						want = t.Sel.Name
					}
				case *ast.Ident:
					if _, ok := dbHandles[t.Name]; ok && ts.Assign.IsValid() {
						want = t.Name
					}
				}
				if want == "" || want == ts.Name.Name {
					continue
				}
				other[ts.Name.Name] = true
				if !deprecated {
					bad = append(bad, where(ts)+": "+ts.Name.Name+" is a database handle; the vocabulary names it "+want+" (Exec, Query, QueryRow: DBTX; Begin: Beginner)")
				}
			}
		}
	}
	for name, f := range p.files {
		where := func(n ast.Node) string { return fmt.Sprintf("%s/%s:%d", p.dir, name, p.fset.Position(n.Pos()).Line) }
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() || (fd.Recv != nil && !exportedRecv(fd.Recv)) {
				continue
			}
			for i, fld := range fd.Type.Params.List {
				tn := typeName(fld.Type)
				if other[tn] {
					bad = append(bad, where(fld)+": "+fd.Name.Name+" takes a "+tn+"; take a DBTX or a Beginner")
				}
				if i != 1 || fd.Recv == nil {
					continue
				}
				if w := map[string]string{"SchemaVersion": "DBTX", "Migrate": "Beginner"}[fd.Name.Name]; w != "" && tn != w {
					bad = append(bad, where(fld)+": "+fd.Name.Name+" takes a "+tn+"; it takes a "+w+" in every package")
				}
			}
		}
	}
	return bad
}

// handleMethods returns the sorted database methods an interface declares,
// counting an embedded DBTX or Beginner as its methods.
func handleMethods(t *ast.InterfaceType) []string {
	var ms []string
	for _, m := range t.Methods.List {
		if len(m.Names) == 0 {
			ms = append(ms, dbHandles[typeName(m.Type)]...)
			continue
		}
		for _, n := range m.Names {
			if slices.Contains(dbMethods, n.Name) {
				ms = append(ms, n.Name)
			}
		}
	}
	slices.Sort(ms)
	return slices.Compact(ms)
}

// typeName is the name of a (possibly qualified or pointer) type expression.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.StarExpr:
		return typeName(t.X)
	}
	return ""
}
