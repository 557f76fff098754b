package forgedtoken

import (
	_ "embed"
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports coord.Token values built outside the SDK.
var Analyzer = &analysis.Analyzer{
	Name: "forgedtoken",
	Doc:  vetutil.Doc(doc, "forgedtoken"),
	URL:  vetutil.DocURL + "#forgedtoken",
	Run:  run,
}

const (
	coordPkg = vetutil.SDK + "/coord"
	rule     = "RFC MUST 3 (the fencing token is the create revision etcd assigned to the holder's key)"
	fix      = "take the token from (*correctnesslease.Lease).Token() or Run's tok parameter, parse one from the wire with coord.ParseToken, declare the zero token with `var zero coord.Token`, and test for it with tok.IsZero()"
)

func run(pass *analysis.Pass) (any, error) {
	if vetutil.IsSDK(pass.Pkg.Path()) {
		return nil, nil
	}
	r := vetutil.NewReporter(pass, "forgedtoken")
	for _, f := range r.Files() {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if strings.HasPrefix(c.Text, "//go:linkname ") && strings.Contains(c.Text, " "+coordPkg+".") {
					r.Report(vetutil.Finding{Pos: c.Pos(), What: "go:linkname into package coord forges tokens behind the SDK's back", Rule: rule, Fix: fix})
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isToken(pass.TypesInfo.TypeOf(n)) {
					r.Report(vetutil.Finding{Pos: n.Pos(), What: "coord.Token composite literal builds a token no lease granted", Rule: rule, Fix: fix})
				}
			case *ast.CallExpr:
				checkConversion(pass, r, n)
			}
			return true
		})
	}
	r.Finish()
	return nil, nil
}

func isToken(t types.Type) bool { return vetutil.IsNamed(t, coordPkg, "Token", false) }

func isTokenPtr(t types.Type) bool { return vetutil.IsNamed(t, coordPkg, "Token", true) }

// checkConversion reports T(x) where T is coord.Token or *coord.Token and x is
// not already of type T.
func checkConversion(pass *analysis.Pass, r *vetutil.Reporter, call *ast.CallExpr) {
	tv, ok := pass.TypesInfo.Types[call.Fun]
	if !ok || !tv.IsType() || len(call.Args) != 1 {
		return
	}
	if !isToken(tv.Type) && !isTokenPtr(tv.Type) {
		return
	}
	if types.Identical(pass.TypesInfo.TypeOf(call.Args[0]), tv.Type) {
		return
	}
	r.Report(vetutil.Finding{Pos: call.Pos(), What: "conversion to " + types.TypeString(tv.Type, func(p *types.Package) string { return p.Name() }) + " builds a token no lease granted", Rule: rule, Fix: fix})
}
