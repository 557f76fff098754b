package ignoredirective

import (
	_ "embed"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports //coordvet:ignore directives that are no exception.
var Analyzer = vetutil.NewCheck("ignoredirective", doc, "exceptions", run)

const format = "//coordvet:ignore <check> owner=<team> expires=<date> <reason>"

func run(pass *analysis.Pass) (any, error) {
	set := pass.ResultOf[vetutil.Exceptions].(*vetutil.ExceptionSet)
	found := &vetutil.Findings{Check: "ignoredirective"}
	for _, e := range set.All {
		if e.Problem == "" {
			continue
		}
		fix := "use " + format
		d := analysis.Diagnostic{
			Pos:      e.Pos,
			End:      e.End,
			Category: "ignoredirective",
			URL:      vetutil.DocURL + "#exceptions",
		}
		if e.Suggest != "" {
			fix = "name " + e.Suggest
			d.SuggestedFixes = []analysis.SuggestedFix{{
				Message:   "name the check " + e.Suggest,
				TextEdits: []analysis.TextEdit{checkNameEdit(e, e.Suggest)},
			}}
		}
		d.Message = vetutil.Message("ignoredirective", "//coordvet:ignore "+e.Problem+": no exception, silences nothing", fix)
		found.List = append(found.List, vetutil.Reported{Pos: e.Pos, Message: d.Message})
		pass.Report(d)
	}
	return found, nil
}

// checkNameEdit replaces the check name of a directive.
func checkNameEdit(e *vetutil.Exception, name string) analysis.TextEdit {
	// The comment is "//coordvet:ignore" + blanks + check; the name starts after
	// the prefix and the blanks.
	off := len(vetutil.DirectivePrefix)
	raw := e.Raw[off:]
	off += len(raw) - len(strings.TrimLeft(raw, " \t"))
	start := e.Pos + token.Pos(off)
	return analysis.TextEdit{Pos: start, End: start + token.Pos(len(e.Check)), NewText: []byte(name)}
}
