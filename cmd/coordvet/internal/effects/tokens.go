package effects

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

const coordPkg = vetutil.SDK + "/coord"

// IsToken reports whether t is coord.Token or *coord.Token.
func IsToken(t types.Type) bool {
	return vetutil.IsNamed(t, coordPkg, "Token", false) || vetutil.IsNamed(t, coordPkg, "Token", true)
}

// IsHolder reports whether t is an SDK type (or a pointer to one), outside
// package coord, with a Token() coord.Token method: a correctness lease, an
// owned partition, whatever the SDK mints tokens into.
func IsHolder(t types.Type) bool {
	if t == nil {
		return false
	}
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || !vetutil.IsSDK(n.Obj().Pkg().Path()) || n.Obj().Pkg().Path() == coordPkg {
		return false
	}
	obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(n), true, n.Obj().Pkg(), "Token")
	fn, ok := obj.(*types.Func)
	if !ok {
		return false
	}
	res := fn.Signature().Results()
	return fn.Signature().Params().Len() == 0 && res.Len() == 1 && vetutil.IsNamed(res.At(0).Type(), coordPkg, "Token", false)
}

// NonUse is a place a token went that is not a write: a log call, a helper
// that never uses it.
type NonUse struct {
	Pos, End token.Pos
	What     string
}

// Reaches reports whether the token carried by seed (a coord.Token or a holder)
// reaches a write in body: passed to a fence, a query, a header, any call that
// is not logging or formatting and not a helper known not to use it; returned;
// stored outside the function; sent on a channel. Logging it, formatting it,
// comparing it, assigning it to _ and handing it to a helper whose fact says
// the token goes nowhere are not uses; they are returned for the message.
func (r *Result) Reaches(body ast.Node, seed *types.Var) (bool, []NonUse) {
	used, returned, non := r.a.reaches(body, seed)
	return used || returned, non
}

type tokenParams struct {
	has      bool
	consumed []int
	returned []int
}

func (a *analyzer) tokenParams(u *Unit) tokenParams {
	fd, ok := u.Node.(*ast.FuncDecl)
	if !ok || fd.Body == nil {
		return tokenParams{}
	}
	var out tokenParams
	i := 0
	for _, field := range fd.Type.Params.List {
		t := a.pass.TypesInfo.TypeOf(field.Type)
		names := field.Names
		if len(names) == 0 {
			i++
			continue
		}
		for _, n := range names {
			if IsToken(t) || IsHolder(t) {
				out.has = true
				if v, ok := a.pass.TypesInfo.Defs[n].(*types.Var); ok && n.Name != "_" {
					used, returned, _ := a.reaches(fd.Body, v)
					if used {
						out.consumed = append(out.consumed, i)
					}
					if returned {
						out.returned = append(out.returned, i)
					}
				}
			}
			i++
		}
	}
	return out
}

type flow struct {
	a       *analyzer
	info    *types.Info
	tainted map[*types.Var]bool
}

// reaches reports whether seed's token reaches a write in body, and whether it
// flows into a result.
func (a *analyzer) reaches(body ast.Node, seed *types.Var) (used, returned bool, non []NonUse) {
	fl := &flow{a: a, info: a.pass.TypesInfo, tainted: map[*types.Var]bool{seed: true}}
	fl.propagate(body)
	ast.Inspect(body, func(n ast.Node) bool {
		if used {
			return false
		}
		switch n := n.(type) {
		case *ast.CallExpr:
			if u, nu := fl.callUse(n); u {
				used = true
			} else if nu != nil {
				non = append(non, *nu)
			}
		case *ast.ReturnStmt:
			for _, res := range n.Results {
				if fl.carries(res) {
					returned = true
				}
			}
		case *ast.SendStmt:
			if fl.carries(n.Value) {
				used = true
			}
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				if fl.local(lhs) || isBlank(lhs) {
					continue
				}
				rhs := n.Rhs[0]
				if len(n.Lhs) == len(n.Rhs) {
					rhs = n.Rhs[i]
				}
				if fl.carries(rhs) {
					used = true // stored where this function cannot follow it
				}
			}
		}
		return true
	})
	return used, returned, non
}

// propagate taints the local variables assigned from tainted expressions.
func (fl *flow) propagate(body ast.Node) {
	for changed := true; changed; {
		changed = false
		mark := func(lhs ast.Expr) {
			id, ok := ast.Unparen(lhs).(*ast.Ident)
			if !ok || id.Name == "_" {
				return
			}
			if v, ok := objOf(fl.info, id).(*types.Var); ok && !v.IsField() && !fl.tainted[v] {
				fl.tainted[v] = true
				changed = true
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if len(n.Lhs) == len(n.Rhs) {
					for i := range n.Lhs {
						if fl.carries(n.Rhs[i]) {
							mark(n.Lhs[i])
						}
					}
				} else if len(n.Rhs) == 1 && fl.carries(n.Rhs[0]) {
					for _, l := range n.Lhs {
						if t := fl.info.TypeOf(l); t == nil || !isError(t) {
							mark(l)
						}
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) && len(n.Values) == len(n.Names) && fl.carries(n.Values[i]) {
						mark(name)
					} else if len(n.Values) == 1 && fl.carries(n.Values[0]) {
						mark(name)
					}
				}
			case *ast.RangeStmt:
				if fl.carries(n.X) {
					if n.Key != nil {
						mark(n.Key)
					}
					if n.Value != nil {
						mark(n.Value)
					}
				}
			}
			return true
		})
	}
}

func isError(t types.Type) bool {
	return types.Identical(t, types.Universe.Lookup("error").Type())
}

func isBlank(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	return ok && id.Name == "_"
}

// local reports whether e is a local variable (not a field, an element or a
// package variable).
func (fl *flow) local(e ast.Expr) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return false
	}
	v, ok := objOf(fl.info, id).(*types.Var)
	return ok && !v.IsField() && v.Pkg() != nil && v.Parent() != v.Pkg().Scope()
}

// carries reports whether the value of e is derived from the token.
func (fl *flow) carries(e ast.Expr) bool {
	switch e := e.(type) {
	case nil:
		return false
	case *ast.Ident:
		v, ok := fl.info.Uses[e].(*types.Var)
		return ok && fl.tainted[v]
	case *ast.ParenExpr:
		return fl.carries(e.X)
	case *ast.SelectorExpr:
		if _, isPkg := fl.info.Uses[identOf(e.X)].(*types.PkgName); isPkg {
			return false
		}
		return fl.carries(e.X)
	case *ast.FuncLit:
		return false
	case *ast.CallExpr:
		switch fl.classify(e) {
		case callLog, callOtherHolderMethod:
			return false
		case callFact:
			return fl.factCarries(e) // a helper returns the token, or a value made from it
		}
		for _, arg := range e.Args {
			if fl.carries(arg) {
				return true
			}
		}
		if sel, ok := ast.Unparen(e.Fun).(*ast.SelectorExpr); ok {
			return fl.carries(sel.X)
		}
		return false
	case *ast.CompositeLit:
		for _, elt := range e.Elts {
			if fl.carries(elt) {
				return true
			}
		}
		return false
	case *ast.KeyValueExpr:
		return fl.carries(e.Value)
	case *ast.BinaryExpr:
		if e.Op == token.EQL || e.Op == token.NEQ || e.Op == token.LSS || e.Op == token.GTR || e.Op == token.LEQ || e.Op == token.GEQ {
			return false
		}
		return fl.carries(e.X) || fl.carries(e.Y)
	case *ast.UnaryExpr:
		return fl.carries(e.X)
	case *ast.StarExpr:
		return fl.carries(e.X)
	case *ast.IndexExpr:
		return fl.carries(e.X)
	case *ast.SliceExpr:
		return fl.carries(e.X)
	case *ast.TypeAssertExpr:
		return fl.carries(e.X)
	}
	return false
}

func identOf(e ast.Expr) *ast.Ident {
	id, _ := ast.Unparen(e).(*ast.Ident)
	return id
}

type callKind int

const (
	callUnknown           callKind = iota // a write, as far as we can tell
	callLog                               // logging, tracing, errors: not a use, result not derived
	callPure                              // formatting, conversion: not a use, result derived
	callOtherHolderMethod                 // Release, Context, Done of a holder: not a use
	callFence                             // a fence in the table
	callFact                              // a function whose fact says which token parameters it uses
	callToken                             // a method of coord.Token, coord.ParseToken
)

func (fl *flow) classify(call *ast.CallExpr) callKind {
	if tv, ok := fl.info.Types[call.Fun]; ok && tv.IsType() {
		return callPure // a conversion
	}
	if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
		if b, ok := fl.info.Uses[id].(*types.Builtin); ok {
			switch b.Name() {
			case "print", "println", "panic":
				return callLog
			case "append", "copy", "min", "max":
				return callPure
			}
			return callLog
		}
	}
	fn := vetutil.Callee(fl.info, call)
	if fn == nil {
		return callUnknown
	}
	pkg := vetutil.FuncPkg(fn)
	switch {
	case pkg == coordPkg:
		return callToken
	case isLogPkg(pkg, fn):
		return callLog
	case isPurePkg(pkg, fn):
		return callPure
	}
	if recv := fn.Signature().Recv(); recv != nil && IsHolder(recv.Type()) {
		if fn.Name() == "Token" {
			return callPure
		}
		return callOtherHolderMethod
	}
	if e := fl.a.table.Lookup(fn); e != nil && e.Kind == Fence {
		return callFence
	}
	if f := fl.a.factOf(fn); f != nil && f.HasTokenParams {
		return callFact
	}
	return callUnknown
}

// factArgs judges a call of a helper whose fact knows its token parameters:
// used when a carrying argument goes to a parameter whose token reaches a
// write (or to one the fact cannot speak for: a string made from the token),
// returned when it goes to one whose token flows into the result.
func (fl *flow) factArgs(call *ast.CallExpr) (used, returned bool) {
	fn := vetutil.Callee(fl.info, call)
	f := fl.a.factOf(fn)
	params := fn.Signature().Params()
	for i, arg := range call.Args {
		if !fl.carries(arg) {
			continue
		}
		pi := min(i, params.Len()-1) // variadic arguments share the last parameter
		if pi < 0 {
			return true, true
		}
		switch pt := params.At(pi).Type(); {
		case !IsToken(pt) && !IsHolder(pt):
			return true, true // passed as something else: we cannot follow it
		case slices.Contains(f.TokenParams, pi):
			used = true
		case slices.Contains(f.ReturnParams, pi):
			returned = true
		}
	}
	return used, returned
}

// factCarries reports whether a helper's result carries the token.
func (fl *flow) factCarries(call *ast.CallExpr) bool {
	used, returned := fl.factArgs(call)
	return used || returned
}

// callUse reports whether a call with a token-carrying argument (or receiver)
// is a use, or else where the token went instead.
func (fl *flow) callUse(call *ast.CallExpr) (bool, *NonUse) {
	carrying := -1
	for i, arg := range call.Args {
		if fl.carries(arg) {
			carrying = i
			break
		}
	}
	recvCarries := false
	if sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr); ok {
		recvCarries = fl.carries(sel.X)
	}
	if carrying < 0 && !recvCarries {
		return false, nil
	}
	line := fl.a.pass.Fset.Position(call.Pos()).Line
	switch fl.classify(call) {
	case callLog:
		return false, &NonUse{call.Pos(), call.End(), fmt.Sprintf("only logged (line %d)", line)}
	case callPure, callToken, callOtherHolderMethod:
		return false, nil
	case callFence, callUnknown:
		return true, nil
	case callFact:
		used, returned := fl.factArgs(call)
		switch {
		case used || carrying < 0: // the helper's receiver carries it: we cannot follow it
			return true, nil
		case returned:
			return false, nil // the result carries it on
		}
		return false, &NonUse{call.Pos(), call.End(), fmt.Sprintf("handed to %s (line %d), which drops it", shortName(vetutil.Callee(fl.info, call)), line)}
	}
	return true, nil
}

func shortName(fn *types.Func) string {
	if r := vetutil.RecvName(fn); r != "" {
		return r + "." + fn.Name()
	}
	return fn.Name()
}

// isLogPkg: logging, tracing and error construction.
func isLogPkg(pkg string, fn *types.Func) bool {
	switch pkg {
	case "log", "log/slog", "errors", "go.uber.org/zap", "go.uber.org/zap/zapcore", "github.com/sirupsen/logrus", "github.com/rs/zerolog",
		"github.com/rs/zerolog/log", "go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/trace", "github.com/go-logr/logr", "testing":
		return true
	case "fmt":
		return strings.HasPrefix(fn.Name(), "Print") || strings.HasPrefix(fn.Name(), "Fprint") || fn.Name() == "Errorf"
	}
	return false
}

// isPurePkg: formatting and encoding whose result carries the token on.
func isPurePkg(pkg string, fn *types.Func) bool {
	switch pkg {
	case "fmt":
		return strings.HasPrefix(fn.Name(), "Sprint") || strings.HasPrefix(fn.Name(), "Append")
	case "strconv", "strings", "bytes", "encoding/json", "encoding/hex", "encoding/base64", "unicode/utf8":
		return true
	}
	return false
}
