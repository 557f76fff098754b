package vetutil

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/tools/go/analysis"
)

// MaxMessage bounds a diagnostic's message, in characters: review bots show it
// inline; the detail is in the check's documentation (the rule help).
const MaxMessage = 200

// Finding is one diagnostic before formatting.
type Finding struct {
	Pos, End token.Pos
	What     string // what is wrong, in the user's terms
	Fix      string // what to write instead, briefly
	// Related are the other places that make the finding: the commit of a
	// dual write, the acquire of an unused token.
	Related []analysis.RelatedInformation
	// Fixes are mechanical edits that resolve the finding.
	Fixes []analysis.SuggestedFix
	// Anchors are other places an exception directive may cover the finding
	// from: where a finding that now sits on the line to change used to be
	// reported (the acquire of a token dropped later), so exceptions written
	// there keep holding.
	Anchors []token.Pos
}

// Findings is what a check found in one package, reported or silenced by an
// exception: the check's analysis result, read by the inventory.
type Findings struct {
	Check string
	List  []Reported
	// Items are what the check saw besides findings, for the inventory: the
	// leases and whether each reaches a fence, the efficiency locks and their
	// reasons, the sagas and their pivots.
	Items []Item
}

// Item is one thing a check saw.
type Item struct {
	Pos    token.Pos
	Kind   string // "lease", "efficiencylock", "saga"
	Name   string // the lease, lock or saga name when constant, else ""
	Detail string // the declared reason, the pivot
	OK     bool   // fenced, declared, exactly one pivot
}

// Reported is one finding of Findings.
type Reported struct {
	Pos     token.Pos
	Message string
	// Exception is the valid directive that silenced it, or nil if reported.
	Exception *Exception
}

// FindingsType is the ResultType of every check.
var FindingsType = reflect.TypeOf((*Findings)(nil))

// Reporter reports the findings of one check in one pass: it drops findings in
// generated files and findings silenced by a valid //coordvet:ignore exception
// for the check, and, at Finish, reports the exceptions that silenced nothing.
// The check's analyzer must require Exceptions.
type Reporter struct {
	pass      *analysis.Pass
	check     string
	valid     []*Exception
	used      map[*Exception]bool
	generated map[string]bool
	found     *Findings
}

// NewReporter returns the reporter of check for pass.
func NewReporter(pass *analysis.Pass, check string) *Reporter {
	r := &Reporter{pass: pass, check: check, used: map[*Exception]bool{}, generated: map[string]bool{}, found: &Findings{Check: check}}
	for _, f := range pass.Files {
		if ast.IsGenerated(f) {
			r.generated[pass.Fset.File(f.FileStart).Name()] = true
		}
	}
	if set, ok := pass.ResultOf[Exceptions].(*ExceptionSet); ok {
		r.valid = set.Valid(check)
	} else {
		panic("coordvet: " + check + " does not require vetutil.Exceptions")
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

// Report reports f unless it is in a generated file or silenced by an exception.
func (r *Reporter) Report(f Finding) {
	if r.generated[r.pass.Fset.PositionFor(f.Pos, false).Filename] {
		return
	}
	msg := Message(r.check, f.What, f.Fix)
	p := r.pass.Fset.Position(f.Pos) // as the user sees it, like the directives
	lines := []token.Position{p}
	for _, a := range f.Anchors {
		lines = append(lines, r.pass.Fset.Position(a))
	}
	for _, e := range r.valid {
		if slices.ContainsFunc(lines, func(l token.Position) bool { return e.Covers(l.Filename, l.Line) }) {
			r.used[e] = true
			r.found.List = append(r.found.List, Reported{Pos: f.Pos, Message: msg, Exception: e})
			return
		}
	}
	r.found.List = append(r.found.List, Reported{Pos: f.Pos, Message: msg})
	r.pass.Report(analysis.Diagnostic{
		Pos:            f.Pos,
		End:            f.End,
		Category:       r.check,
		Message:        msg,
		URL:            DocURL + "#" + r.check,
		Related:        f.Related,
		SuggestedFixes: f.Fixes,
	})
}

// Message formats a finding, "<check>: <what>; fix: <fix> (RFC <rule>)", cut
// to MaxMessage characters by shortening what.
func Message(check, what, fix string) string {
	tail := fmt.Sprintf("; fix: %s (RFC %s)", fix, ruleOf(check))
	if fix == "" {
		tail = fmt.Sprintf(" (RFC %s)", ruleOf(check))
	}
	head := check + ": "
	room := MaxMessage - utf8.RuneCountInString(head) - utf8.RuneCountInString(tail)
	return head + Shorten(what, room) + tail
}

// Shorten cuts s to at most n characters, ending in "…" if it was cut.
func Shorten(s string, n int) string {
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Excepts marks the valid exceptions covering pos as used, without a finding:
// an exception on a helper's publish that keeps it out of the helper's fact.
func (r *Reporter) Excepts(pos token.Pos) {
	p := r.pass.Fset.Position(pos)
	for _, e := range r.valid {
		if e.Covers(p.Filename, p.Line) {
			r.used[e] = true
		}
	}
}

// Count returns how many findings the reporter has seen so far.
func (r *Reporter) Count() int { return len(r.found.List) }

// Note records an item for the inventory.
func (r *Reporter) Note(it Item) { r.found.Items = append(r.found.Items, it) }

// Finish reports every exception for the check that silenced nothing in this
// pass, with a fix that deletes it, and returns what the check found. Call it
// once, after the last Report.
func (r *Reporter) Finish() *Findings {
	for _, e := range r.valid {
		if r.used[e] {
			continue
		}
		r.pass.Report(analysis.Diagnostic{
			Pos:      e.Pos,
			End:      e.End,
			Category: r.check,
			Message: Message(r.check, fmt.Sprintf("unused exception: //coordvet:ignore %s silences no %s finding on this line or the next", r.check, r.check),
				"delete it"),
			URL: DocURL + "#exceptions",
			SuggestedFixes: []analysis.SuggestedFix{{
				Message:   "delete the unused //coordvet:ignore " + r.check,
				TextEdits: []analysis.TextEdit{r.deletion(e.Directive)},
			}},
		})
	}
	return r.found
}

// deletion removes a directive: its whole line when it stands alone, else the
// comment only.
func (r *Reporter) deletion(d *Directive) analysis.TextEdit {
	edit := analysis.TextEdit{Pos: d.Pos, End: d.End}
	tf := r.pass.Fset.File(d.Pos)
	src, err := r.pass.ReadFile(tf.Name())
	if err != nil || tf.Size() != len(src) {
		return edit
	}
	start := tf.LineStart(tf.Line(d.Pos))
	before := src[tf.Offset(start):tf.Offset(d.Pos)]
	end := tf.Offset(d.End)
	if len(bytes.TrimSpace(before)) == 0 && end < len(src) && src[end] == '\n' {
		edit.Pos, edit.End = start, d.End+1
	}
	return edit
}
