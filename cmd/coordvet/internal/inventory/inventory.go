// Package inventory collects, per package, what the RFC's success metrics
// count: correctness leases and whether each reaches a fence, efficiency locks
// and their reasons, hand-rolled locks, dual writes, outbox enqueues, mutating
// and idempotent handlers (HTTP and gRPC), sagas and their pivots, and the
// exceptions with their owners and expiries. The checks' results provide most
// of it; this analyzer adds enqueues and handlers.
package inventory

import (
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

// Package is the inventory of one package.
type Package struct {
	Fset     *token.FileSet
	Findings []*vetutil.Findings // one per check
	Except   *vetutil.ExceptionSet
	Enqueues []token.Pos
	Handlers []Handler
}

// Handler is an HTTP or gRPC handler.
type Handler struct {
	Pos        token.Pos
	Kind       string // "http" or "grpc"
	Name       string
	Method     string // the HTTP method it is registered for, if known
	Mutating   bool
	Idempotent bool
	Why        string // what makes it mutating
}

// New returns the inventory analyzer over the given checks (their results are
// read) and the effects analyzer they require.
func New(checks []*analysis.Analyzer) *analysis.Analyzer {
	var eff *analysis.Analyzer
	for _, c := range checks {
		for _, r := range c.Requires {
			if len(r.FactTypes) > 0 {
				eff = r
			}
		}
	}
	if eff == nil {
		eff = effects.Default.Analyzer
	}
	reqs := append([]*analysis.Analyzer{vetutil.Exceptions, eff}, checks...)
	return &analysis.Analyzer{
		Name:       "coordvetinventory",
		Doc:        "collect the RFC's success metrics for the coordvet -inventory report",
		URL:        vetutil.DocURL + "#inventory",
		Requires:   reqs,
		ResultType: reflect.TypeOf((*Package)(nil)),
		Run: func(pass *analysis.Pass) (any, error) {
			p := &Package{Fset: pass.Fset, Except: pass.ResultOf[vetutil.Exceptions].(*vetutil.ExceptionSet)}
			for _, c := range checks {
				if f, ok := pass.ResultOf[c].(*vetutil.Findings); ok {
					p.Findings = append(p.Findings, f)
				}
			}
			res := pass.ResultOf[eff].(*effects.Result)
			collect(pass, res, p)
			return p, nil
		},
	}
}

const (
	idemPkg = vetutil.SDK + "/idempotency"
	httpidm = vetutil.SDK + "/idempotency/httpidem"
	outbox  = vetutil.SDK + "/outbox"
)

func collect(pass *analysis.Pass, res *effects.Result, p *Package) {
	info := pass.TypesInfo
	methods := map[ast.Node]string{}    // handler node -> HTTP method
	wrapped := map[ast.Node]bool{}      // handler registered behind httpidem
	middleware := map[*types.Var]bool{} // locals holding httpidem.Middleware's result
	handlerNode := func(e ast.Expr) ast.Node {
		switch e := ast.Unparen(e).(type) {
		case *ast.FuncLit:
			return e
		case *ast.Ident, *ast.SelectorExpr:
			if fn, ok := info.Uses[identOf(e)].(*types.Func); ok {
				return declOf(pass, fn)
			}
		}
		return nil
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				if len(n.Rhs) == 1 {
					if call, ok := ast.Unparen(n.Rhs[0]).(*ast.CallExpr); ok && vetutil.IsFunc(vetutil.Callee(info, call), httpidm, "Middleware") {
						if id, ok := n.Lhs[0].(*ast.Ident); ok {
							if v, ok := objOf(info, id).(*types.Var); ok {
								middleware[v] = true
							}
						}
					}
				}
			case *ast.CallExpr:
				fn := vetutil.Callee(info, n)
				if fn == nil {
					return true
				}
				if vetutil.FuncPkg(fn) == outbox && strings.HasPrefix(fn.Name(), "Enqueue") {
					p.Enqueues = append(p.Enqueues, n.Pos())
				}
				method, handler := registration(info, fn, n)
				if handler == nil {
					return true
				}
				behind := false
				for {
					call, ok := ast.Unparen(handler).(*ast.CallExpr)
					if !ok || len(call.Args) != 1 {
						break
					}
					if id, ok := ast.Unparen(call.Fun).(*ast.Ident); ok {
						if v, ok := info.Uses[id].(*types.Var); ok && middleware[v] {
							behind = true
						}
					}
					if vetutil.FuncPkg(vetutil.Callee(info, call)) == httpidm {
						behind = true
					}
					handler = call.Args[0]
				}
				if hn := handlerNode(handler); hn != nil {
					methods[hn] = method
					wrapped[hn] = wrapped[hn] || behind
				}
			}
			return true
		})
	}
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			var ft *ast.FuncType
			var body *ast.BlockStmt
			name := ""
			switch n := n.(type) {
			case *ast.FuncDecl:
				ft, body, name = n.Type, n.Body, n.Name.Name
				if n.Recv != nil && isGRPCServer(info, n) && body != nil {
					h := Handler{Pos: n.Pos(), Kind: "grpc", Name: recvName(n) + "." + name}
					h.Mutating, h.Why = mutating(res, n, name)
					h.Idempotent = callsIdempotency(info, body)
					p.Handlers = append(p.Handlers, h)
					return true
				}
			case *ast.FuncLit:
				ft, body = n.Type, n.Body
				name = "func literal"
			default:
				return true
			}
			if body == nil || !isHTTPHandler(info, ft) {
				return true
			}
			h := Handler{Pos: n.Pos(), Kind: "http", Name: name, Method: methods[n]}
			h.Mutating, h.Why = mutating(res, n, name)
			switch h.Method {
			case "POST", "PUT", "PATCH", "DELETE":
				h.Mutating, h.Why = true, h.Method+" route"
			case "GET", "HEAD", "OPTIONS":
			}
			h.Idempotent = wrapped[n] || callsIdempotency(info, body)
			p.Handlers = append(p.Handlers, h)
			return true
		})
	}
}

// registration recognises mux.HandleFunc("POST /x", h), mux.Handle(pattern, h)
// and router.Post/Put/Patch/Delete/Get(pattern, h) (chi, echo-like routers),
// returning the HTTP method ("" if the pattern has none) and the handler.
func registration(info *types.Info, fn *types.Func, call *ast.CallExpr) (string, ast.Expr) {
	if len(call.Args) < 2 {
		return "", nil
	}
	pattern, ok := vetutil.ConstString(info, call.Args[0])
	if !ok {
		return "", nil
	}
	switch name := fn.Name(); name {
	case "Handle", "HandleFunc":
		if m, _, ok := strings.Cut(pattern, " "); ok && m == strings.ToUpper(m) {
			return m, call.Args[1]
		}
		return "", call.Args[1]
	case "Post", "Put", "Patch", "Delete", "Get", "POST", "PUT", "PATCH", "DELETE", "GET":
		return strings.ToUpper(name), call.Args[len(call.Args)-1]
	}
	return "", nil
}

func mutating(res *effects.Result, n ast.Node, name string) (bool, string) {
	if u := res.Unit(n); u != nil {
		if len(u.Commits) > 0 {
			return true, u.Commits[0].What
		}
		if len(u.Publish) > 0 {
			return true, u.Publish[0].What
		}
	}
	for _, verb := range []string{"Create", "Update", "Delete", "Set", "Put", "Add", "Remove", "Cancel", "Charge", "Pay", "Refund", "Submit", "Transfer", "Place"} {
		if strings.HasPrefix(name, verb) {
			return true, "named " + name
		}
	}
	return false, ""
}

func callsIdempotency(info *types.Info, body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if pkg := vetutil.FuncPkg(vetutil.Callee(info, call)); vetutil.UnderPackage(pkg, idemPkg) {
				found = true
			}
		}
		return !found
	})
	return found
}

func isHTTPHandler(info *types.Info, ft *ast.FuncType) bool {
	var types_ []types.Type
	for _, f := range ft.Params.List {
		t := info.TypeOf(f.Type)
		n := max(len(f.Names), 1)
		for range n {
			types_ = append(types_, t)
		}
	}
	return len(types_) == 2 && vetutil.IsNamed(types_[0], "net/http", "ResponseWriter", false) && vetutil.IsNamed(types_[1], "net/http", "Request", true)
}

// isGRPCServer reports a method (ctx, *Req) (*Resp, error) of a type that
// embeds a generated Unimplemented…Server.
func isGRPCServer(info *types.Info, fd *ast.FuncDecl) bool {
	fn, ok := info.Defs[fd.Name].(*types.Func)
	if !ok || !fn.Exported() {
		return false
	}
	sig := fn.Signature()
	if sig.Params().Len() != 2 || sig.Results().Len() != 2 || !vetutil.IsNamed(sig.Params().At(0).Type(), "context", "Context", false) {
		return false
	}
	t := sig.Recv().Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for f := range st.Fields() {
		name := f.Name()
		if f.Embedded() && strings.HasPrefix(name, "Unimplemented") && strings.HasSuffix(name, "Server") {
			return true
		}
	}
	return false
}

func recvName(fd *ast.FuncDecl) string {
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return "?"
}

func identOf(e ast.Expr) *ast.Ident {
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

func objOf(info *types.Info, id *ast.Ident) types.Object {
	if o := info.Defs[id]; o != nil {
		return o
	}
	return info.Uses[id]
}

func declOf(pass *analysis.Pass, fn *types.Func) ast.Node {
	for _, f := range pass.Files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && pass.TypesInfo.Defs[fd.Name] == fn {
				return fd
			}
		}
	}
	return nil
}
