package vetutil

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// DocURL is where every check is documented; each diagnostic links to its
// section (DocURL + "#" + check).
const DocURL = "docs/vet.md"

// Checks returns the names of the coordvet checks that a directive may name.
func Checks() []string {
	return []string{"pavedroad", "fencetoken", "forgedtoken", "efficiencydecl", "dualwrite", "sagapivot"}
}

// Finding is one diagnostic before formatting.
type Finding struct {
	Pos  token.Pos
	What string // what is wrong, in the user's terms
	Rule string // the RFC rule it breaks, e.g. "RFC MUST 3 (correctness leases)"
	Fix  string // what to write instead
}

// Reporter reports the findings of one check in one pass: it drops findings in
// generated files and findings silenced by a well-formed //coordvet:ignore
// directive for the check, and, at Finish, reports the directives for the check
// that silenced nothing.
type Reporter struct {
	pass      *analysis.Pass
	check     string
	dirs      []*Directive
	generated map[string]bool
}

// NewReporter returns the reporter of check for pass.
func NewReporter(pass *analysis.Pass, check string) *Reporter {
	r := &Reporter{pass: pass, check: check, generated: map[string]bool{}}
	var files []*ast.File
	for _, f := range pass.Files {
		name := pass.Fset.File(f.FileStart).Name()
		if ast.IsGenerated(f) {
			r.generated[name] = true
			continue
		}
		files = append(files, f)
	}
	for _, d := range Directives(pass.Fset, files) {
		if d.Check == check && d.Reason != "" {
			r.dirs = append(r.dirs, d)
		}
	}
	return r
}

// Files returns the pass's files that are not generated.
func (r *Reporter) Files() []*ast.File {
	var out []*ast.File
	for _, f := range r.pass.Files {
		if !r.generated[r.pass.Fset.File(f.FileStart).Name()] {
			out = append(out, f)
		}
	}
	return out
}

// IsTestFile reports whether the node lies in a _test.go file.
func (r *Reporter) IsTestFile(pos token.Pos) bool {
	return strings.HasSuffix(r.pass.Fset.File(pos).Name(), "_test.go")
}

// Report reports f unless it is in a generated file or silenced by a directive.
func (r *Reporter) Report(f Finding) {
	if r.generated[r.pass.Fset.PositionFor(f.Pos, false).Filename] {
		return
	}
	p := r.pass.Fset.Position(f.Pos) // as the user sees it, like the directives
	for _, d := range r.dirs {
		if d.covers(p.Filename, p.Line) {
			d.used = true
			return
		}
	}
	r.pass.Report(analysis.Diagnostic{
		Pos:      f.Pos,
		Category: r.check,
		Message:  Message(r.check, f),
		URL:      DocURL + "#" + r.check,
	})
}

// Message formats a finding: the check, what is wrong, the RFC rule, the fix and
// the link to the documentation.
func Message(check string, f Finding) string {
	return fmt.Sprintf("%s: %s; breaks %s; fix: %s (see %s#%s)", check, f.What, f.Rule, f.Fix, DocURL, check)
}

// Finish reports every directive for the check that silenced nothing in this
// pass. Call it once, after the last Report.
func (r *Reporter) Finish() {
	for _, d := range r.dirs {
		if !d.used {
			r.pass.Report(analysis.Diagnostic{
				Pos:      d.Pos,
				Category: r.check,
				Message: fmt.Sprintf("%s: unused directive: //coordvet:ignore %s silences no %s finding on this line or the next; remove it (see %s#ignoring-a-finding)",
					r.check, r.check, r.check, DocURL),
				URL: DocURL + "#ignoring-a-finding",
			})
		}
	}
}
