package vetutil

import (
	"go/ast"
	"go/token"
	"strings"
)

// DirectivePrefix starts a suppression comment:
//
//	//coordvet:ignore <check> <reason>
//
// It silences the named check on its own line and on the line below it. The
// reason is mandatory: a directive without one suppresses nothing and is
// reported by the ignoredirective analyzer.
const DirectivePrefix = "//coordvet:ignore"

// Directive is one //coordvet:ignore comment.
type Directive struct {
	Pos    token.Pos // the start of the comment
	File   string    // the file name, as the file set knows it
	Line   int       // the line the comment is on
	Check  string    // the check it names; "" if missing
	Reason string    // the reason given; "" if missing
	used   bool
}

// Directives returns every //coordvet:ignore comment in the files, well formed
// or not, in source order.
func Directives(fset *token.FileSet, files []*ast.File) []*Directive {
	var out []*Directive
	for _, f := range files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				d := parseDirective(c.Text)
				if d == nil {
					continue
				}
				p := fset.Position(c.Slash)
				d.Pos, d.File, d.Line = c.Slash, p.Filename, p.Line
				out = append(out, d)
			}
		}
	}
	return out
}

// parseDirective parses one comment; nil if it is not a directive. Anything
// after a nested "//" is a trailing comment, not part of the reason.
func parseDirective(text string) *Directive {
	rest, ok := strings.CutPrefix(text, DirectivePrefix)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return nil
	}
	if i := strings.Index(rest, "//"); i >= 0 {
		rest = rest[:i]
	}
	fields := strings.Fields(rest)
	d := &Directive{}
	if len(fields) > 0 {
		d.Check = fields[0]
	}
	if len(fields) > 1 {
		d.Reason = strings.Join(fields[1:], " ")
	}
	return d
}

// covers reports whether the directive silences a diagnostic at file:line.
func (d *Directive) covers(file string, line int) bool {
	return d.File == file && (d.Line == line || d.Line == line-1)
}
