package fencetoken

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports correctness leases whose token is never used.
var Analyzer = &analysis.Analyzer{
	Name: "fencetoken",
	Doc:  vetutil.Doc(doc, "fencetoken"),
	URL:  vetutil.DocURL + "#fencetoken",
	Run:  run,
}

const (
	leasePkg = vetutil.SDK + "/correctnesslease"
	coordPkg = vetutil.SDK + "/coord"
	rule     = "RFC MUST 3 (every write from the holder carries the fencing token)"
	fixToken = "pass lease.Token() with every write to the resource (pgfence Fence.GuardTx/Exec, a fenced UPDATE, the Coord-Fencing-Token header)"
)

func run(pass *analysis.Pass) (any, error) {
	if vetutil.IsPackage(pass.Pkg.Path(), leasePkg) {
		return nil, nil
	}
	r := vetutil.NewReporter(pass, "fencetoken")
	for _, f := range r.Files() {
		test := r.IsTestFile(f.FileStart)
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); test && (!ok || !strings.HasPrefix(fd.Name.Name, "Example")) {
				continue
			}
			checkUnit(pass, r, decl)
		}
	}
	r.Finish()
	return nil, nil
}

// leaseVar is a local variable that receives a lease from an Acquire-like call.
type leaseVar struct {
	acquired token.Pos
	name     string
}

// checkUnit checks one top-level declaration, closures included.
func checkUnit(pass *analysis.Pass, r *vetutil.Reporter, decl ast.Decl) {
	info := pass.TypesInfo
	tracked := map[*types.Var]leaseVar{}
	var order []*types.Var
	fenced := map[*types.Var]bool{} // Token() called or the lease escaped
	var stack []ast.Node
	ast.Inspect(decl, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		var parent ast.Node
		if len(stack) > 1 {
			parent = stack[len(stack)-2]
		}
		switch n := n.(type) {
		case *ast.FuncType:
			// A named result escapes through every return, bare ones included.
			if n.Results != nil {
				for _, field := range n.Results.List {
					for _, name := range field.Names {
						if v, ok := info.Defs[name].(*types.Var); ok {
							fenced[v] = true
						}
					}
				}
			}
		case *ast.CallExpr:
			fn := vetutil.Callee(info, n)
			if vetutil.FuncPkg(fn) != leasePkg {
				return true
			}
			checkCallbacks(pass, r, n)
			if fn.Name() == "Token" && vetutil.RecvName(fn) == "Lease" {
				if dropped(parent, n, 0) {
					r.Report(vetutil.Finding{Pos: n.Pos(), What: "the result of Lease.Token() is dropped", Rule: rule, Fix: fixToken})
				}
				return true
			}
			idx := leaseResult(fn)
			if idx < 0 {
				return true
			}
			if dropped(parent, n, idx) {
				r.Report(vetutil.Finding{Pos: n.Pos(), What: "correctness lease from " + fn.Name() + " is discarded, so its fencing token can never reach a resource", Rule: rule, Fix: "keep the lease and " + fixToken})
				return true
			}
			if v := assignedVar(info, parent, n, idx); v != nil {
				if _, seen := tracked[v]; !seen {
					tracked[v] = leaseVar{acquired: n.Pos(), name: v.Name()}
					order = append(order, v)
				}
			}
		case *ast.Ident:
			v, ok := info.Uses[n].(*types.Var)
			if ok && isLease(v.Type()) && fencesOrEscapes(parent, n) {
				fenced[v] = true
			}
		}
		return true
	})
	for _, v := range order {
		if !fenced[v] {
			lv := tracked[v]
			r.Report(vetutil.Finding{Pos: lv.acquired, What: "lease " + lv.name + " is held but Token() is never called on it and it never leaves the function, so no write is fenced", Rule: rule, Fix: fixToken})
		}
	}
}

func isLease(t types.Type) bool {
	return vetutil.IsNamed(t, leasePkg, "Lease", true) || vetutil.IsNamed(t, leasePkg, "Lease", false)
}

// leaseResult returns the index of fn's *Lease result, or -1.
func leaseResult(fn *types.Func) int {
	res := fn.Signature().Results()
	for i := 0; i < res.Len(); i++ {
		if isLease(res.At(i).Type()) {
			return i
		}
	}
	return -1
}

// dropped reports whether result idx of call is thrown away: the call is a
// statement, or the result is assigned to _.
func dropped(parent ast.Node, call *ast.CallExpr, idx int) bool {
	switch p := parent.(type) {
	case *ast.ExprStmt:
		return true
	case *ast.AssignStmt:
		if len(p.Rhs) == 1 && p.Rhs[0] == call && idx < len(p.Lhs) {
			return isBlank(p.Lhs[idx])
		}
		if len(p.Lhs) == len(p.Rhs) && idx == 0 {
			for i, rhs := range p.Rhs {
				if rhs == call {
					return isBlank(p.Lhs[i])
				}
			}
		}
	case *ast.ValueSpec:
		if len(p.Values) == 1 && p.Values[0] == call && idx < len(p.Names) {
			return p.Names[idx].Name == "_"
		}
	}
	return false
}

func isBlank(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == "_"
}

// assignedVar returns the local variable that receives result idx of call, or
// nil if the result goes anywhere else (a field, a package variable, an
// argument, a return), which lets the lease escape.
func assignedVar(info *types.Info, parent ast.Node, call *ast.CallExpr, idx int) *types.Var {
	var id *ast.Ident
	switch p := parent.(type) {
	case *ast.AssignStmt:
		if len(p.Rhs) == 1 && p.Rhs[0] == call && idx < len(p.Lhs) {
			id, _ = p.Lhs[idx].(*ast.Ident)
		}
	case *ast.ValueSpec:
		if len(p.Values) == 1 && p.Values[0] == call && idx < len(p.Names) {
			id = p.Names[idx]
		}
	}
	if id == nil {
		return nil
	}
	obj := info.Defs[id]
	if obj == nil {
		obj = info.Uses[id]
	}
	v, ok := obj.(*types.Var)
	if !ok || v.IsField() || v.Pkg() == nil || v.Parent() == v.Pkg().Scope() {
		return nil
	}
	return v
}

// fencesOrEscapes classifies one use of a lease variable: true if it calls
// Token() or hands the lease to code this function cannot see.
func fencesOrEscapes(parent ast.Node, id *ast.Ident) bool {
	switch p := parent.(type) {
	case *ast.SelectorExpr:
		if p.X == id {
			return p.Sel.Name == "Token"
		}
	case *ast.BinaryExpr:
		return p.Op != token.EQL && p.Op != token.NEQ
	case *ast.AssignStmt:
		for _, l := range p.Lhs {
			if l == id {
				return false // (re)assignment of the variable itself
			}
		}
		if len(p.Lhs) == len(p.Rhs) {
			for i, rhs := range p.Rhs {
				if rhs == id && isBlank(p.Lhs[i]) {
					return false // _ = lease
				}
			}
		}
	}
	return true
}

// checkCallbacks reports func literals passed to the lease package whose
// coord.Token parameter is never used.
func checkCallbacks(pass *analysis.Pass, r *vetutil.Reporter, call *ast.CallExpr) {
	for _, arg := range call.Args {
		lit, ok := ast.Unparen(arg).(*ast.FuncLit)
		if !ok {
			continue
		}
		for _, field := range lit.Type.Params.List {
			if !vetutil.IsNamed(pass.TypesInfo.TypeOf(field.Type), coordPkg, "Token", false) {
				continue
			}
			if len(field.Names) == 0 {
				r.Report(vetutil.Finding{Pos: field.Pos(), What: "the callback's fencing token parameter is unnamed, so no write in it is fenced", Rule: rule, Fix: "name the coord.Token parameter and pass it with every write"})
				continue
			}
			for _, name := range field.Names {
				v, _ := pass.TypesInfo.Defs[name].(*types.Var)
				if name.Name == "_" || v == nil || !usedIn(pass.TypesInfo, lit.Body, v) {
					r.Report(vetutil.Finding{Pos: name.Pos(), What: "the callback's fencing token " + name.Name + " is never used, so no write in it is fenced", Rule: rule, Fix: "pass " + name.Name + " with every write to the resource"})
				}
			}
		}
	}
}

// usedIn reports whether v is used in body other than as `_ = v`.
func usedIn(info *types.Info, body *ast.BlockStmt, v *types.Var) bool {
	used := false
	ast.Inspect(body, func(n ast.Node) bool {
		if used {
			return false
		}
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == len(as.Rhs) {
			for i, rhs := range as.Rhs {
				if id, ok := rhs.(*ast.Ident); ok && info.Uses[id] == v && isBlank(as.Lhs[i]) {
					return false
				}
			}
		}
		if id, ok := n.(*ast.Ident); ok && info.Uses[id] == v {
			used = true
		}
		return !used
	})
	return used
}
