package vetutil

import (
	"go/ast"
	"reflect"
	"slices"
	"strings"
	"time"

	"golang.org/x/tools/go/analysis"
)

// Exceptions parses every //coordvet:ignore directive of a package once and
// judges it against today's date. Every check requires it; it reports nothing
// itself (ignoredirective does).
var Exceptions = &analysis.Analyzer{
	Name:       "coordvetexceptions",
	Doc:        "parse and judge the //coordvet:ignore exceptions of a package (no diagnostics of its own; see ignoredirective)",
	URL:        DocURL + "#exceptions",
	Run:        runExceptions,
	ResultType: reflect.TypeOf((*ExceptionSet)(nil)),
}

// ExceptionSet is the Exceptions analyzer's result for one package.
type ExceptionSet struct {
	Today time.Time
	All   []*Exception // in source order, generated files excluded
}

// Exception is one directive and its verdict.
type Exception struct {
	*Directive
	// Problem says why the directive is no exception ("" if it is valid): an
	// unknown check, no owner, no expiry, no reason, a past expiry or one more
	// than two quarters ahead.
	Problem string
	// Suggest is the known check nearest to an unknown check name, or "".
	Suggest string
}

// Valid returns the valid exceptions for check.
func (s *ExceptionSet) Valid(check string) []*Exception {
	var out []*Exception
	for _, e := range s.All {
		if e.Check == check && e.Problem == "" {
			out = append(out, e)
		}
	}
	return out
}

func runExceptions(pass *analysis.Pass) (any, error) {
	today, err := Today()
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, f := range pass.Files {
		if !ast.IsGenerated(f) {
			files = append(files, f)
		}
	}
	set := &ExceptionSet{Today: today}
	known := CheckNames()
	for _, d := range Directives(pass.Fset, files) {
		e := &Exception{Directive: d}
		switch {
		case d.Check == "":
			e.Problem = "names no check"
		case !slices.Contains(known, d.Check):
			e.Problem = "names unknown check " + d.Check
			e.Suggest = Nearest(d.Check)
			if e.Suggest == "" {
				e.Problem += " (known: " + strings.Join(known, ", ") + ")"
			}
		default:
			e.Problem = d.Problem(today)
		}
		set.All = append(set.All, e)
	}
	return set, nil
}
