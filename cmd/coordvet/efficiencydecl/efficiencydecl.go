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
var Analyzer = vetutil.NewCheck("efficiencydecl", doc, "efficiencydecl", run)

const (
	lockPkg = vetutil.SDK + "/efficiencylock"
	fix     = "write DuplicatesHarmless(\"why\") at the call, or fence a correctnesslease"
)

func run(pass *analysis.Pass) (any, error) {
	r := vetutil.NewReporter(pass, "efficiencydecl")
	if vetutil.IsPackage(pass.Pkg.Path(), lockPkg) {
		return r.Finish(), nil
	}
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
				what, reason := badReason(pass, call.Args[i])
				if what != "" {
					r.Report(vetutil.Finding{Pos: call.Args[i].Pos(), End: call.Args[i].End(), What: "efficiencylock." + fn.Name() + " " + what, Fix: fix})
				}
				r.Note(vetutil.Item{Pos: call.Pos(), Kind: "efficiencylock", Detail: reason, OK: what == ""})
			}
			return true
		})
	}
	return r.Finish(), nil
}

// badReason explains what is wrong with a Reason argument ("" if nothing) and
// returns the reason when it is a constant.
func badReason(pass *analysis.Pass, arg ast.Expr) (what, reason string) {
	call, ok := ast.Unparen(arg).(*ast.CallExpr)
	if !ok || !vetutil.IsFunc(vetutil.Callee(pass.TypesInfo, call), lockPkg, "DuplicatesHarmless") || len(call.Args) != 1 {
		return "gets a Reason that is not declared at the call with DuplicatesHarmless(\"…\")", ""
	}
	s, ok := vetutil.ConstString(pass.TypesInfo, call.Args[0])
	if !ok {
		return "gets a duplicates-harmless reason that is not a constant string", ""
	}
	if strings.TrimSpace(s) == "" {
		return "gets an empty duplicates-harmless reason", s
	}
	return "", s
}
