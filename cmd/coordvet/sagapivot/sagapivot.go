package sagapivot

import (
	_ "embed"
	"go/ast"
	"go/token"
	"go/types"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports literal saga definitions that break the pivot rule.
var Analyzer = vetutil.NewCheck("sagapivot", doc, "sagapivot", run)

const (
	sagaPkg = vetutil.SDK + "/saga"
)

func run(pass *analysis.Pass) (any, error) {
	r := vetutil.NewReporter(pass, "sagapivot")
	if vetutil.IsPackage(pass.Pkg.Path(), sagaPkg) {
		return r.Finish(), nil
	}
	for _, f := range r.Files() {
		slices := localSlices(pass.TypesInfo, f)
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok && vetutil.IsFunc(vetutil.Callee(pass.TypesInfo, call), sagaPkg, "New") {
				checkDefinition(pass, r, call, slices)
			}
			return true
		})
	}
	return r.Finish(), nil
}

type step struct {
	kind string // "Compensatable", "Pivot" or "Retriable"
	call *ast.CallExpr
}

// literalSteps returns the steps of a saga.New call if every step is a direct
// call of a step constructor — as arguments, or as the elements of a slice
// literal passed with ... (inline, or a local variable whose only assignment is
// that literal); ok is false otherwise.
func literalSteps(info *types.Info, call *ast.CallExpr, slices map[*types.Var]*ast.CompositeLit) (steps []step, ok bool) {
	if len(call.Args) < 1 {
		return nil, false
	}
	args := call.Args[1:]
	if call.Ellipsis != token.NoPos {
		if len(args) != 1 {
			return nil, false
		}
		lit, _ := ast.Unparen(args[0]).(*ast.CompositeLit)
		if id, isIdent := ast.Unparen(args[0]).(*ast.Ident); isIdent {
			if v, isVar := info.Uses[id].(*types.Var); isVar {
				lit = slices[v]
			}
		}
		if lit == nil {
			return nil, false
		}
		args = lit.Elts
	}
	for _, arg := range args {
		sc, isCall := ast.Unparen(arg).(*ast.CallExpr)
		if !isCall {
			return nil, false
		}
		fn := vetutil.Callee(info, sc)
		if vetutil.FuncPkg(fn) != sagaPkg || fn.Signature().Recv() != nil {
			return nil, false
		}
		switch fn.Name() {
		case "Compensatable", "Pivot", "Retriable":
			steps = append(steps, step{kind: fn.Name(), call: sc})
		default:
			return nil, false
		}
	}
	return steps, true
}

func checkDefinition(pass *analysis.Pass, r *vetutil.Reporter, call *ast.CallExpr, slices map[*types.Var]*ast.CompositeLit) {
	steps, ok := literalSteps(pass.TypesInfo, call, slices)
	if !ok {
		return
	}
	hasPivot, pivots, pivotName := false, 0, ""
	for _, s := range steps {
		if s.kind == "Pivot" {
			hasPivot = true
			pivots++
			if pivotName == "" && len(s.call.Args) > 0 {
				pivotName, _ = vetutil.ConstString(pass.TypesInfo, s.call.Args[0])
			}
		}
	}
	name, _ := vetutil.ConstString(pass.TypesInfo, call.Args[0])
	defer func(n int) {
		r.Note(vetutil.Item{Pos: call.Pos(), Kind: "saga", Name: name, Detail: pivotName, OK: pivots == 1 && r.Count() == n})
	}(r.Count())
	pivot := -1
	for i, s := range steps {
		switch s.kind {
		case "Pivot":
			if pivot >= 0 {
				r.Report(vetutil.Finding{Pos: s.call.Pos(), End: s.call.End(), What: "a second pivot in one saga definition", Fix: "keep one pivot (the point of no return); make the other step Compensatable before it or Retriable after it"})
				continue
			}
			pivot = i
		case "Compensatable":
			if len(s.call.Args) >= 3 && isNil(pass.TypesInfo, s.call.Args[2]) {
				r.Report(vetutil.Finding{Pos: s.call.Pos(), End: s.call.End(), What: "a Compensatable step with a nil compensation cannot be undone", Fix: "give the step an idempotent compensation, or make it the pivot"})
			}
			if pivot >= 0 {
				r.Report(vetutil.Finding{Pos: s.call.Pos(), End: s.call.End(), What: "a Compensatable step after the pivot is never compensated", Fix: "move it before the pivot, or make it Retriable"})
			}
		case "Retriable":
			if hasPivot && pivot < 0 {
				r.Report(vetutil.Finding{Pos: s.call.Pos(), End: s.call.End(), What: "a Retriable step before the pivot has no compensation, so a later failure cannot undo it", Fix: "make it Compensatable, or move it after the pivot"})
			}
		}
	}
	if !hasPivot {
		r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "saga definition without a pivot", Fix: "declare the point of no return with saga.Pivot(name, action) between the compensatable and the retriable steps"})
	}
}

func isNil(info *types.Info, e ast.Expr) bool {
	tv, ok := info.Types[ast.Unparen(e)]
	return ok && tv.IsNil()
}

// localSlices finds, in f, the variables whose value is known where they are
// used: assigned exactly once, from a slice literal, and never written through
// (no element assignment, no address taken). Any other variable is left out:
// its steps are not known.
func localSlices(info *types.Info, f *ast.File) map[*types.Var]*ast.CompositeLit {
	lits := map[*types.Var]*ast.CompositeLit{}
	writes := map[*types.Var]int{}
	varOf := func(e ast.Expr) *types.Var {
		id, ok := ast.Unparen(e).(*ast.Ident)
		if !ok {
			return nil
		}
		v, _ := info.ObjectOf(id).(*types.Var)
		return v
	}
	assign := func(lhs ast.Expr, rhs ast.Expr) {
		if ix, ok := ast.Unparen(lhs).(*ast.IndexExpr); ok {
			lhs = ix.X // an element written: the variable's literal is not its value
			rhs = nil
		}
		v := varOf(lhs)
		if v == nil {
			return
		}
		writes[v]++
		if cl, ok := ast.Unparen(rhs).(*ast.CompositeLit); ok && rhs != nil {
			lits[v] = cl
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				var rhs ast.Expr
				if len(n.Lhs) == len(n.Rhs) {
					rhs = n.Rhs[i]
				}
				assign(lhs, rhs)
			}
		case *ast.ValueSpec:
			for i, name := range n.Names {
				var rhs ast.Expr
				if len(n.Names) == len(n.Values) {
					rhs = n.Values[i]
				}
				if rhs != nil || n.Type == nil {
					assign(name, rhs)
				}
			}
		case *ast.UnaryExpr:
			if v := varOf(n.X); v != nil && n.Op == token.AND {
				writes[v] += 2 // shared: written elsewhere
			}
		case *ast.RangeStmt:
			if n.Key != nil {
				assign(n.Key, nil)
			}
			if n.Value != nil {
				assign(n.Value, nil)
			}
		}
		return true
	})
	for v := range lits {
		if writes[v] != 1 || v.Parent() == nil || v.Parent() == v.Pkg().Scope() { // a package-level var: other files write it
			delete(lits, v)
		}
	}
	return lits
}
