package efficiencydecl

import (
	_ "embed"
	"go/ast"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports efficiency locks without a declared reason.
var Analyzer = &analysis.Analyzer{
	Name: "efficiencydecl",
	Doc:  vetutil.Doc(doc, "efficiencydecl"),
	URL:  vetutil.DocURL + "#efficiencydecl",
	Run:  run,
}

const (
	lockPkg = vetutil.SDK + "/efficiencylock"
	rule    = "RFC MUST 4 (Redis locks only where duplicate execution is harmless, and the code says so)"
	fix     = "pass efficiencylock.DuplicatesHarmless(\"<why a second run does no harm>\") with a constant string at the call, or use correctnesslease with fenced writes if duplicates are not harmless"
)

func run(pass *analysis.Pass) (any, error) {
	if vetutil.IsPackage(pass.Pkg.Path(), lockPkg) {
		return nil, nil
	}
	r := vetutil.NewReporter(pass, "efficiencydecl")
	for _, f := range r.Files() {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn := vetutil.Callee(pass.TypesInfo, call)
			if vetutil.FuncPkg(fn) != lockPkg || fn.Name() == "DuplicatesHarmless" {
				return true
			}
			params := fn.Signature().Params()
			for i := 0; i < params.Len() && i < len(call.Args); i++ {
				if !vetutil.IsNamed(params.At(i).Type(), lockPkg, "Reason", false) {
					continue
				}
				if what := badReason(pass, call.Args[i]); what != "" {
					r.Report(vetutil.Finding{Pos: call.Args[i].Pos(), What: "efficiencylock." + fn.Name() + " " + what, Rule: rule, Fix: fix})
				}
			}
			return true
		})
	}
	r.Finish()
	return nil, nil
}

// badReason explains what is wrong with a Reason argument, or returns "".
func badReason(pass *analysis.Pass, arg ast.Expr) string {
	call, ok := ast.Unparen(arg).(*ast.CallExpr)
	if !ok || !vetutil.IsFunc(vetutil.Callee(pass.TypesInfo, call), lockPkg, "DuplicatesHarmless") || len(call.Args) != 1 {
		return "gets a Reason that is not declared at the call with DuplicatesHarmless(\"…\")"
	}
	s, ok := vetutil.ConstString(pass.TypesInfo, call.Args[0])
	if !ok {
		return "gets a duplicates-harmless reason that is not a constant string"
	}
	if strings.TrimSpace(s) == "" {
		return "gets an empty duplicates-harmless reason"
	}
	return ""
}
