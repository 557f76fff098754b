package fencetoken

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// New returns a fencetoken analyzer over the effects set s.
func New(s *effects.Set) *analysis.Analyzer {
	return vetutil.NewCheck("fencetoken", doc, "fencetoken", func(pass *analysis.Pass) (any, error) { return run(pass, s) }, s.Analyzer)
}

// Analyzer is the fencetoken analyzer over effects.Default.
var Analyzer = New(effects.Default)

const (
	coordPkg = vetutil.SDK + "/coord"
	fix      = "pass it to a fence, a query or a header"
)

type checker struct {
	pass *analysis.Pass
	r    *vetutil.Reporter
	res  *effects.Result
}

func run(pass *analysis.Pass, s *effects.Set) (any, error) {
	c := &checker{pass: pass, r: vetutil.NewReporter(pass, "fencetoken"), res: pass.ResultOf[s.Analyzer].(*effects.Result)}
	for _, f := range c.r.Files() {
		test := c.r.IsTestFile(f.FileStart)
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); test && (!ok || !strings.HasPrefix(fd.Name.Name, "Example")) {
				continue
			}
			c.checkDecl(decl)
		}
	}
	return c.r.Finish(), nil
}

// held is a local variable that receives a token holder from an SDK call.
type held struct {
	v    *types.Var
	call *ast.CallExpr
	from string // the function it came from
	name string // the lease name, if a constant argument
}

// checkDecl checks one top-level declaration, closures included.
func (c *checker) checkDecl(decl ast.Decl) {
	info := c.pass.TypesInfo
	var holders []*held
	byVar := map[*types.Var]*held{}
	named := namedResults(info, decl) // returned by every return, bare ones included
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
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fn := vetutil.Callee(info, call)
		if fn == nil || !vetutil.IsSDK(vetutil.FuncPkg(fn)) || vetutil.FuncPkg(fn) == coordPkg {
			return true
		}
		if !vetutil.IsPackage(c.pass.Pkg.Path(), vetutil.FuncPkg(fn)) { // a package's own examples are exempt
			c.checkCallbacks(decl, call)
		}
		if recv := fn.Signature().Recv(); recv != nil && effects.IsHolder(recv.Type()) && fn.Name() == "Token" {
			if dropped(parent, call, 0) {
				f := vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "the result of " + vetutil.RecvName(fn) + ".Token() is dropped", Fix: fix}
				if h := byVar[receiverVar(info, call)]; h != nil {
					f.Related = append(f.Related, related(h))
				}
				c.r.Report(f)
			}
			return true
		}
		idx := holderResult(fn)
		if idx < 0 || vetutil.IsPackage(c.pass.Pkg.Path(), holderPkg(fn, idx)) {
			return true
		}
		name := leaseName(info, call)
		if dropped(parent, call, idx) {
			c.r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "the lease from " + fn.Name() + " is discarded: its token reaches no resource", Fix: "keep the lease and pass its token with every write"})
			c.r.Note(vetutil.Item{Pos: call.Pos(), Kind: "lease", Name: name, Detail: fn.Name()})
			return true
		}
		if v := assignedVar(info, parent, call, idx); v != nil && !named[v] {
			if _, seen := byVar[v]; !seen {
				h := &held{v: v, call: call, from: fn.Name(), name: name}
				byVar[v] = h
				holders = append(holders, h)
			}
		} else {
			c.r.Note(vetutil.Item{Pos: call.Pos(), Kind: "lease", Name: name, Detail: fn.Name() + " (handed on)", OK: true})
		}
		return true
	})
	for _, h := range holders {
		used, non := c.res.Reaches(decl, h.v)
		c.r.Note(vetutil.Item{Pos: h.call.Pos(), Kind: "lease", Name: h.name, Detail: h.from, OK: used})
		if used {
			continue
		}
		f := vetutil.Finding{Pos: h.call.Pos(), End: h.call.End(), Fix: fix,
			What: fmt.Sprintf("the token of %s (from %s) reaches no write", h.v.Name(), h.from)}
		if len(non) > 0 {
			// On the line that drops it (where a review comment belongs), naming
			// the acquire; an exception at the acquire still covers it.
			acquired := c.pass.Fset.Position(h.call.Pos()).Line
			f = vetutil.Finding{Pos: non[0].Pos, End: non[0].End, Fix: fix, Anchors: []token.Pos{h.call.Pos()},
				What:    fmt.Sprintf("the token of %s (from %s, line %d) reaches no write: %s", h.v.Name(), h.from, acquired, non[0].What),
				Related: []analysis.RelatedInformation{related(h)}}
		}
		for _, nu := range non[min(1, len(non)):] {
			f.Related = append(f.Related, analysis.RelatedInformation{Pos: nu.Pos, End: nu.End, Message: "the token of " + h.v.Name() + " is " + nu.What})
		}
		c.r.Report(f)
	}
}

// namedResults returns the named results of the functions in decl.
func namedResults(info *types.Info, decl ast.Decl) map[*types.Var]bool {
	out := map[*types.Var]bool{}
	ast.Inspect(decl, func(n ast.Node) bool {
		if ft, ok := n.(*ast.FuncType); ok && ft.Results != nil {
			for _, field := range ft.Results.List {
				for _, name := range field.Names {
					if v, ok := info.Defs[name].(*types.Var); ok {
						out[v] = true
					}
				}
			}
		}
		return true
	})
	return out
}

func related(h *held) analysis.RelatedInformation {
	return analysis.RelatedInformation{Pos: h.call.Pos(), End: h.call.End(), Message: h.v.Name() + " acquired here (" + h.from + ")"}
}

// receiverVar returns the variable x of a call x.M(), or nil.
func receiverVar(info *types.Info, call *ast.CallExpr) *types.Var {
	sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	id, ok := ast.Unparen(sel.X).(*ast.Ident)
	if !ok {
		return nil
	}
	v, _ := info.Uses[id].(*types.Var)
	return v
}

// holderResult returns the index of fn's token-holder result, or -1.
func holderResult(fn *types.Func) int {
	res := fn.Signature().Results()
	for i := 0; i < res.Len(); i++ {
		if effects.IsHolder(res.At(i).Type()) {
			return i
		}
	}
	return -1
}

func holderPkg(fn *types.Func, idx int) string {
	t := fn.Signature().Results().At(idx).Type()
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	return types.Unalias(t).(*types.Named).Obj().Pkg().Path()
}

// leaseName returns the first constant string argument of an acquire call.
func leaseName(info *types.Info, call *ast.CallExpr) string {
	for _, arg := range call.Args {
		if s, ok := vetutil.ConstString(info, arg); ok {
			return s
		}
	}
	return ""
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
// argument, a return), which hands the token on.
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

// checkCallbacks reports function literals passed to the SDK whose
// coord.Token parameter never reaches a write.
func (c *checker) checkCallbacks(decl ast.Decl, call *ast.CallExpr) {
	for _, arg := range call.Args {
		lit, ok := ast.Unparen(arg).(*ast.FuncLit)
		if !ok {
			continue
		}
		for _, field := range lit.Type.Params.List {
			if !vetutil.IsNamed(c.pass.TypesInfo.TypeOf(field.Type), coordPkg, "Token", false) {
				continue
			}
			if len(field.Names) == 0 {
				c.r.Report(vetutil.Finding{Pos: field.Pos(), End: field.End(), What: "the callback's fencing token parameter is unnamed, so no write in it is fenced", Fix: "name the coord.Token parameter and pass it with every write"})
				continue
			}
			for _, name := range field.Names {
				v, _ := c.pass.TypesInfo.Defs[name].(*types.Var)
				if name.Name == "_" || v == nil {
					c.r.Report(vetutil.Finding{Pos: name.Pos(), End: name.End(), What: "the callback's fencing token " + name.Name + " is never used, so no write in it is fenced", Fix: "name it and pass it with every write"})
					continue
				}
				used, non := c.res.Reaches(lit.Body, v)
				c.r.Note(vetutil.Item{Pos: lit.Pos(), Kind: "lease", Name: leaseName(c.pass.TypesInfo, call), Detail: vetutil.Callee(c.pass.TypesInfo, call).Name() + " callback", OK: used})
				if used {
					continue
				}
				f := vetutil.Finding{Pos: name.Pos(), End: name.End(), What: "the callback's token " + name.Name + " reaches no write", Fix: "pass " + name.Name + " to a fence, a query or a header"}
				if len(non) > 0 {
					f.What += ": " + non[0].What
				}
				for _, nu := range non {
					f.Related = append(f.Related, analysis.RelatedInformation{Pos: nu.Pos, Message: name.Name + " is " + nu.What})
				}
				c.r.Report(f)
			}
		}
	}
}
