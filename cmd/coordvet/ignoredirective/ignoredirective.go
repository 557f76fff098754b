package ignoredirective

import (
	_ "embed"
	"go/ast"
	"slices"
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vetutil"
)

//go:embed doc.go
var doc string

// Analyzer reports malformed //coordvet:ignore directives.
var Analyzer = &analysis.Analyzer{
	Name: "ignoredirective",
	Doc:  vetutil.Doc(doc, "ignoredirective"),
	URL:  vetutil.DocURL + "#ignoring-a-finding",
	Run:  run,
}

func run(pass *analysis.Pass) (any, error) {
	var files []*ast.File
	for _, f := range pass.Files {
		if !ast.IsGenerated(f) {
			files = append(files, f)
		}
	}
	known := vetutil.Checks()
	for _, d := range vetutil.Directives(pass.Fset, files) {
		var problem string
		switch {
		case d.Check == "":
			problem = "names no check"
		case !slices.Contains(known, d.Check):
			problem = "names unknown check " + d.Check + " (known: " + strings.Join(known, ", ") + ")"
		case d.Reason == "":
			problem = "gives no reason"
		default:
			continue
		}
		pass.Report(analysis.Diagnostic{
			Pos:      d.Pos,
			Category: "ignoredirective",
			Message:  "ignoredirective: //coordvet:ignore " + problem + ", so it silences nothing; write //coordvet:ignore <check> <reason> (see " + vetutil.DocURL + "#ignoring-a-finding)",
			URL:      vetutil.DocURL + "#ignoring-a-finding",
		})
	}
	return nil, nil
}
