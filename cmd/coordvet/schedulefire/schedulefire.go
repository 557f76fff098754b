package schedulefire

import (
	_ "embed"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports schedule handlers whose effects ignore the fire's key and token.
var Analyzer = vetutil.NewCheck("schedulefire", doc, "schedulefire", run)

const (
	schedPkg = vetutil.SDK + "/schedule"
	fix      = "pass it f.Key() or f.Token, or use the fire's tx"
)

// table says which calls write, begin, commit or publish.
var table = effects.NewTable()

// identifies are the fields and methods of a Fire that carry its identity or
// its token: what an effect outside the transaction deduplicates or fences on.
var identifies = map[string]bool{"Key": true, "ID": true, "String": true, "Token": true, "Local": true, "Nominal": true}

func run(pass *analysis.Pass) (any, error) {
	r := vetutil.NewReporter(pass, "schedulefire")
	if vetutil.IsPackage(pass.Pkg.Path(), schedPkg) {
		return r.Finish(), nil
	}
	for _, f := range r.Files() {
		ast.Inspect(f, func(n ast.Node) bool {
			var ft *ast.FuncType
			var body *ast.BlockStmt
			switch n := n.(type) {
			case *ast.FuncLit:
				ft, body = n.Type, n.Body
			case *ast.FuncDecl:
				ft, body = n.Type, n.Body
			default:
				return true
			}
			if body == nil {
				return true
			}
			fire, tx := handlerParams(pass, ft)
			if fire == nil {
				return true
			}
			check(pass, r, body, fire, tx)
			return false // nested handlers are checked with this one
		})
	}
	return r.Finish(), nil
}

// handlerParams returns the *schedule.Fire parameter of a function (nil if
// it has none) and its pgx.Tx parameter, if any.
func handlerParams(pass *analysis.Pass, ft *ast.FuncType) (fire, tx types.Object) {
	for _, fld := range ft.Params.List {
		t := pass.TypesInfo.TypeOf(fld.Type)
		for _, name := range fld.Names {
			obj := pass.TypesInfo.Defs[name]
			switch {
			case vetutil.IsNamed(t, schedPkg, "Fire", true):
				fire = obj
			case vetutil.IsNamed(t, "github.com/jackc/pgx/v5", "Tx", false):
				tx = obj
			}
		}
	}
	return fire, tx
}

// check reports the effects in body that nothing derived from fire reaches.
func check(pass *analysis.Pass, r *vetutil.Reporter, body *ast.BlockStmt, fire, tx types.Object) {
	tainted := map[types.Object]bool{fire: true}
	mentions := func(e ast.Node) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := ast.Unparen(n.X).(*ast.Ident); ok && pass.TypesInfo.Uses[id] == fire {
					found = found || identifies[n.Sel.Name]
					return false // f.Job, f.Attempt …: not the fire's identity
				}
			case *ast.Ident:
				found = found || tainted[pass.TypesInfo.Uses[n]]
			}
			return !found
		})
		return found
	}
	// Taint to a fixpoint: a variable assigned from the fire, and every
	// variable a call with a tainted argument is made on or given (a request
	// whose header is set from the key).
	for changed := true; changed; {
		changed = false
		taint := func(e ast.Expr) {
			if obj := rootObj(pass, e); obj != nil && !tainted[obj] {
				tainted[obj], changed = true, true
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, rhs := range n.Rhs {
					if mentions(rhs) {
						for j, lhs := range n.Lhs {
							if len(n.Lhs) == len(n.Rhs) && i != j {
								continue
							}
							taint(lhs)
						}
					}
				}
			case *ast.ValueSpec:
				for _, v := range n.Values {
					if mentions(v) {
						for _, name := range n.Names {
							if obj := pass.TypesInfo.Defs[name]; obj != nil && !tainted[obj] {
								tainted[obj], changed = true, true
							}
						}
					}
				}
			case *ast.CallExpr:
				if !mentions(n) {
					return true
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
					taint(sel.X)
				}
				for _, a := range n.Args {
					if u, ok := a.(*ast.UnaryExpr); ok {
						taint(u.X)
					} else {
						taint(a)
					}
				}
			}
			return true
		})
	}
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		what := effectOf(pass, call)
		if what == "" {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && tx != nil && rootObj(pass, sel.X) == tx {
			return true // the fire's own transaction
		}
		if mentions(call) {
			return true
		}
		r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(),
			What: "handler's " + what + " ignores the fire's key and token", Fix: fix})
		return true
	})
}

// effectOf names what call does outside the fire's transaction, or "".
func effectOf(pass *analysis.Pass, call *ast.CallExpr) string {
	fn := vetutil.Callee(pass.TypesInfo, call)
	if fn == nil {
		return ""
	}
	if vetutil.FuncPkg(fn) == "net/http" {
		switch recv := vetutil.RecvName(fn); {
		case recv == "Client" && (fn.Name() == "Do" || fn.Name() == "Post" || fn.Name() == "PostForm"),
			recv == "" && (fn.Name() == "Post" || fn.Name() == "PostForm"):
			return "HTTP request (" + fn.Name() + ")"
		}
		return ""
	}
	e := table.Lookup(fn)
	if e == nil {
		return ""
	}
	switch e.Kind {
	case effects.Write:
		if sql, ok := firstConstString(pass, call); ok && !writesSQL(sql, e.Query) {
			return "" // a read
		}
		return string(e.Kind) + " (" + fn.Name() + ")"
	case effects.Begin, effects.Commit, effects.Publish:
		return string(e.Kind) + " (" + fn.Name() + ")"
	}
	return ""
}

// firstConstString returns the first constant string argument of call.
func firstConstString(pass *analysis.Pass, call *ast.CallExpr) (string, bool) {
	for _, a := range call.Args {
		if s, ok := vetutil.ConstString(pass.TypesInfo, a); ok {
			return s, true
		}
	}
	return "", false
}

// writesSQL reports whether a constant statement writes: for Query-like
// calls only an INSERT, UPDATE, DELETE or MERGE (or a WITH holding one); for
// Exec anything but a SELECT, SHOW or VALUES.
func writesSQL(sql string, query bool) bool {
	f := strings.Fields(strings.ToUpper(sql))
	if len(f) == 0 {
		return false
	}
	switch f[0] {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
		return true
	case "WITH":
		u := strings.ToUpper(sql)
		return strings.Contains(u, "INSERT ") || strings.Contains(u, "UPDATE ") || strings.Contains(u, "DELETE ")
	case "SELECT", "SHOW", "VALUES", "TABLE":
		return false
	}
	return !query
}

// rootObj returns the variable an expression starts from (x in x.a.b,
// x[i], *x), or nil.
func rootObj(pass *analysis.Pass, e ast.Expr) types.Object {
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.Ident:
			if obj := pass.TypesInfo.Uses[x]; obj != nil {
				return obj
			}
			return pass.TypesInfo.Defs[x]
		case *ast.SelectorExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok {
				e = sel.X
				continue
			}
			return nil
		default:
			return nil
		}
	}
}
