package forgedtoken

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

// Analyzer reports coord.Token values built outside the SDK.
var Analyzer = vetutil.NewCheck("forgedtoken", doc, "forgedtoken", run)

const (
	coordPkg = vetutil.SDK + "/coord"
	fix      = "use Lease.Token() or Run's token; parse only text from outside"
)

type checker struct {
	pass    *analysis.Pass
	r       *vetutil.Reporter
	parents map[ast.Node]ast.Node
}

func run(pass *analysis.Pass) (any, error) {
	r := vetutil.NewReporter(pass, "forgedtoken")
	if vetutil.IsSDK(pass.Pkg.Path()) {
		return r.Finish(), nil
	}
	for _, f := range r.Files() {
		c := &checker{pass: pass, r: r, parents: map[ast.Node]ast.Node{}}
		for _, cg := range f.Comments {
			for _, cm := range cg.List {
				if strings.HasPrefix(cm.Text, "//go:linkname ") && strings.Contains(cm.Text, " "+coordPkg+".") {
					r.Report(vetutil.Finding{Pos: cm.Pos(), End: cm.End(), What: "go:linkname into package coord forges tokens behind the SDK's back", Fix: fix})
				}
			}
		}
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			if len(stack) > 0 {
				c.parents[n] = stack[len(stack)-1]
			}
			stack = append(stack, n)
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isToken(pass.TypesInfo.TypeOf(n)) {
					c.checkLiteral(n)
				}
			case *ast.CallExpr:
				c.checkConversion(n)
				c.checkParse(n)
			}
			return true
		})
	}
	return r.Finish(), nil
}

const number = "a formatted number"

func isToken(t types.Type) bool { return vetutil.IsNamed(t, coordPkg, "Token", false) }

func isTokenPtr(t types.Type) bool { return vetutil.IsNamed(t, coordPkg, "Token", true) }

// checkLiteral reports a coord.Token literal, except the zero token returned
// beside an error (return coord.Token{}, err) and the zero token compared with
// (==, !=, a switch case): a zero check builds no token anyone presents.
func (c *checker) checkLiteral(lit *ast.CompositeLit) {
	parent := c.parents[lit]
	for {
		p, ok := parent.(*ast.ParenExpr)
		if !ok {
			break
		}
		parent = c.parents[p]
	}
	switch p := parent.(type) {
	case *ast.ReturnStmt:
		if len(p.Results) > 1 && len(lit.Elts) == 0 {
			last := p.Results[len(p.Results)-1]
			if t := c.pass.TypesInfo.TypeOf(last); t != nil && isError(t) && !c.isNil(last) {
				return // the zero token beside an error: no token at all
			}
		}
	case *ast.BinaryExpr:
		if (p.Op == token.EQL || p.Op == token.NEQ) && len(lit.Elts) == 0 {
			return // a zero check (tok != (coord.Token{})): nothing is built, nothing presented
		}
	case *ast.CaseClause:
		if len(lit.Elts) == 0 {
			return // switch tok { case coord.Token{}: }: a zero check too
		}
	}
	c.r.Report(vetutil.Finding{Pos: lit.Pos(), End: lit.End(), What: "a coord.Token composite literal builds a token no lease granted", Fix: "use a lease's token; the zero token is var zero coord.Token"})
}

func isError(t types.Type) bool { return types.Identical(t, types.Universe.Lookup("error").Type()) }

func (c *checker) isNil(e ast.Expr) bool {
	tv, ok := c.pass.TypesInfo.Types[ast.Unparen(e)]
	return ok && tv.IsNil()
}

// checkConversion reports T(x) where T is coord.Token or *coord.Token and x is
// not already of type T.
func (c *checker) checkConversion(call *ast.CallExpr) {
	tv, ok := c.pass.TypesInfo.Types[call.Fun]
	if !ok || !tv.IsType() || len(call.Args) != 1 {
		return
	}
	if !isToken(tv.Type) && !isTokenPtr(tv.Type) {
		return
	}
	if types.Identical(c.pass.TypesInfo.TypeOf(call.Args[0]), tv.Type) {
		return
	}
	c.r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: "a conversion to " + types.TypeString(tv.Type, func(p *types.Package) string { return p.Name() }) + " builds a token no lease granted", Fix: fix})
}

// checkParse reports coord.ParseToken(s) and tok.UnmarshalText(b) whose text
// was made in this process: a constant, a number formatted with strconv or
// fmt, a concatenation of those.
func (c *checker) checkParse(call *ast.CallExpr) {
	fn := vetutil.Callee(c.pass.TypesInfo, call)
	if fn == nil || vetutil.FuncPkg(fn) != coordPkg || len(call.Args) != 1 {
		return
	}
	isParse := fn.Name() == "ParseToken" && fn.Signature().Recv() == nil
	isUnmarshal := fn.Name() == "UnmarshalText" && vetutil.RecvName(fn) == "Token"
	if !isParse && !isUnmarshal {
		return
	}
	if why := c.madeHere(call.Args[0], 0); why != "" {
		c.r.Report(vetutil.Finding{Pos: call.Pos(), End: call.End(), What: fn.Name() + " of " + why + " forges a token: the text never came from a holder", Fix: fix})
	}
}

// madeHere says how e was made in this process ("a constant", "a formatted
// number"), or returns "" if it may have come from outside.
func (c *checker) madeHere(e ast.Expr, depth int) string {
	if depth > 8 {
		return ""
	}
	info := c.pass.TypesInfo
	e = ast.Unparen(e)
	if tv, ok := info.Types[e]; ok && tv.Value != nil {
		return "a constant"
	}
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			x, y := c.madeHere(e.X, depth+1), c.madeHere(e.Y, depth+1)
			if x == number || y == number {
				return number // lease + "@" + strconv.Itoa(n): the revision is made up here
			}
			if x != "" && y != "" {
				if x == "a constant" {
					return y
				}
				return x
			}
		}
	case *ast.CallExpr:
		if tv, ok := info.Types[e.Fun]; ok && tv.IsType() && len(e.Args) == 1 {
			return c.madeHere(e.Args[0], depth+1) // []byte(s), string(b)
		}
		fn := vetutil.Callee(info, e)
		switch pkg := vetutil.FuncPkg(fn); {
		case pkg == "strconv" && (strings.HasPrefix(fn.Name(), "Format") || strings.HasPrefix(fn.Name(), "Append") || fn.Name() == "Itoa"):
			return number
		case pkg == "fmt" && (strings.HasPrefix(fn.Name(), "Sprint") || strings.HasPrefix(fn.Name(), "Append")):
			for _, arg := range e.Args {
				if b, ok := info.TypeOf(arg).Underlying().(*types.Basic); ok && b.Info()&types.IsNumeric != 0 {
					return number
				}
			}
			all := len(e.Args) > 0
			for _, arg := range e.Args {
				all = all && c.madeHere(arg, depth+1) != ""
			}
			if all {
				return "a formatted constant"
			}
		}
	case *ast.Ident:
		v, ok := info.Uses[e].(*types.Var)
		if !ok || v.Pkg() == nil || v.Parent() == v.Pkg().Scope() || v.IsField() {
			return ""
		}
		return c.localMadeHere(v, depth)
	}
	return ""
}

// localMadeHere follows the assignments of a local variable in its function:
// made here only if every value assigned to it was.
func (c *checker) localMadeHere(v *types.Var, depth int) string {
	scope := c.enclosingFunc(v.Pos())
	if scope == nil {
		return ""
	}
	why, assigned, outside := "", false, false
	ast.Inspect(scope, func(n ast.Node) bool {
		if outside {
			return false
		}
		var lhs []ast.Expr
		var rhs []ast.Expr
		switch n := n.(type) {
		case *ast.AssignStmt:
			lhs, rhs = n.Lhs, n.Rhs
		case *ast.ValueSpec:
			for _, name := range n.Names {
				lhs = append(lhs, name)
			}
			rhs = n.Values
		case *ast.UnaryExpr:
			if n.Op == token.AND && c.isVar(n.X, v) {
				outside = true // its address escapes: anything may write it
			}
			return true
		default:
			return true
		}
		for i, l := range lhs {
			if !c.isVar(l, v) {
				continue
			}
			if len(rhs) != len(lhs) {
				outside = true
				return false
			}
			w := c.madeHere(rhs[i], depth+1)
			if w == "" {
				outside = true
				return false
			}
			assigned, why = true, w
		}
		return true
	})
	if outside || !assigned {
		return ""
	}
	return why
}

func (c *checker) isVar(e ast.Expr, v *types.Var) bool {
	id, ok := ast.Unparen(e).(*ast.Ident)
	if !ok {
		return false
	}
	return c.pass.TypesInfo.Defs[id] == v || c.pass.TypesInfo.Uses[id] == v
}

// enclosingFunc returns the body of the function declaring pos.
func (c *checker) enclosingFunc(pos token.Pos) ast.Node {
	for _, f := range c.pass.Files {
		if f.FileStart > pos || pos > f.FileEnd {
			continue
		}
		var found ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil || n.Pos() > pos || n.End() < pos {
				return false
			}
			switch n.(type) {
			case *ast.FuncDecl, *ast.FuncLit:
				found = n
			}
			return true
		})
		return found
	}
	return nil
}
