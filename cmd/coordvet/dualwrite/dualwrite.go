package dualwrite

import (
	_ "embed"
	"fmt"
	"go/ast"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// New returns a dualwrite analyzer over the effects set s, with the -brokers
// and -commits flags that add to s's table.
func New(s *effects.Set) *analysis.Analyzer {
	a := vetutil.NewCheck("dualwrite", doc, "dualwrite", func(pass *analysis.Pass) (any, error) { return run(pass, s) }, s.Analyzer)
	a.Flags.Var(tableFlag{s.Table, effects.Publish}, "brokers", "extra broker publish calls, comma-separated importpath:Name or importpath:Type.Name")
	a.Flags.Var(tableFlag{s.Table, effects.Commit}, "commits", "extra transaction commit calls, comma-separated importpath:Name or importpath:Type.Name")
	return a
}

// Analyzer is the dualwrite analyzer over effects.Default.
var Analyzer = New(effects.Default)

// tableFlag adds entries of one kind to a table; each Set appends.
type tableFlag struct {
	t    *effects.Table
	kind effects.Kind
}

func (f tableFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.t.Added(f.kind)
}

func (f tableFlag) Set(s string) error { return f.t.Add(f.kind, s) }

const (
	outboxPkg = vetutil.SDK + "/outbox"
	fix       = "use outbox EnqueueTx in the transaction"
)

func run(pass *analysis.Pass, s *effects.Set) (any, error) {
	r := vetutil.NewReporter(pass, "dualwrite")
	if vetutil.UnderPackage(pass.Pkg.Path(), outboxPkg) {
		return r.Finish(), nil // the relay and its publishers publish by design
	}
	res := pass.ResultOf[s.Analyzer].(*effects.Result)
	for _, u := range res.Units {
		checkUnit(pass, r, u)
	}
	return r.Finish(), nil
}

// checkUnit reports each publish of a unit that also commits through another
// call: commit-then-publish or publish-then-commit, directly or in helpers.
func checkUnit(pass *analysis.Pass, r *vetutil.Reporter, u *effects.Unit) {
	seen := map[*ast.CallExpr]bool{}
	for call := range u.Excepted {
		r.Excepts(call.Pos()) // kept out of the unit's fact, so used even if nothing pairs here
	}
	for _, p := range u.Publish {
		if seen[p.Call] {
			continue
		}
		seen[p.Call] = true
		for _, c := range u.Commits {
			if c.Call == p.Call {
				continue // one helper that does both is reported where it does
			}
			line := pass.Fset.Position(c.Call.Pos()).Line
			r.Report(vetutil.Finding{
				Pos:  p.Call.Pos(),
				End:  p.Call.End(),
				What: fmt.Sprintf("%s commits (%s, line %d) and publishes (%s)", u.Name, c.What, line, p.What),
				Fix:  fix,
				Related: []analysis.RelatedInformation{{
					Pos: c.Call.Pos(), End: c.Call.End(), Message: "the commit of the dual write: " + c.What,
				}},
			})
			break
		}
	}
}
