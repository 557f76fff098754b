package vetutil

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"
	"time"
)

// DirectivePrefix starts an exception comment (RFC "Exceptions"):
//
//	//coordvet:ignore <check> owner=<team> expires=<YYYY-MM-DD> <reason>
//
// It silences the named check on its own line and on the line below it, while
// it is valid: an owner, an expiry that is neither past nor more than
// MaxExceptionLife ahead, and a reason. An invalid directive silences nothing
// and is reported by the ignoredirective analyzer.
const DirectivePrefix = "//coordvet:ignore"

// MaxExceptionLife is how far ahead an expiry may lie: two quarters (RFC
// "Exceptions": no later than two quarters after it was granted).
const MaxExceptionLife = 6 // months

// DateLayout is the layout of expires= and of COORDVET_TODAY.
const DateLayout = "2006-01-02"

// Directive is one //coordvet:ignore comment.
type Directive struct {
	Pos     token.Pos // the start of the comment
	End     token.Pos // the end of the comment
	File    string    // the file name, as the file set knows it
	Line    int       // the line the comment is on
	Check   string    // the check it names; "" if missing
	Owner   string    // owner=; "" if missing
	Expires string    // expires= as written; "" if missing
	Reason  string    // the reason given; "" if missing
	Raw     string    // the comment's text
}

// Directives returns every //coordvet:ignore comment in the files, well formed
// or not, in source order.
func Directives(fset *token.FileSet, files []*ast.File) []*Directive {
	var out []*Directive
	for _, f := range files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				d := ParseDirective(c.Text)
				if d == nil {
					continue
				}
				p := fset.Position(c.Slash)
				d.Pos, d.End, d.File, d.Line = c.Slash, c.End(), p.Filename, p.Line
				out = append(out, d)
			}
		}
	}
	return out
}

// ParseDirective parses one comment; nil if it is not a directive. Anything
// after a nested "//" is a trailing comment, not part of the reason. owner= and
// expires= may come in either order, before the reason.
func ParseDirective(text string) *Directive {
	rest, ok := strings.CutPrefix(text, DirectivePrefix)
	if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
		return nil
	}
	if i := strings.Index(rest, "//"); i >= 0 {
		rest = rest[:i]
	}
	fields := strings.Fields(rest)
	d := &Directive{Raw: text}
	if len(fields) > 0 {
		d.Check, fields = fields[0], fields[1:]
	}
	for len(fields) > 0 {
		if v, ok := strings.CutPrefix(fields[0], "owner="); ok && d.Owner == "" {
			d.Owner = v
		} else if v, ok := strings.CutPrefix(fields[0], "expires="); ok && d.Expires == "" {
			d.Expires = v
		} else {
			break
		}
		fields = fields[1:]
	}
	d.Reason = strings.Join(fields, " ")
	return d
}

// Problem says why the directive is no exception on the given day, or returns
// "" if it is valid. It does not check the check name (see ignoredirective).
func (d *Directive) Problem(today time.Time) string {
	var missing []string
	if d.Owner == "" {
		missing = append(missing, "owner=<team>")
	}
	if d.Expires == "" {
		missing = append(missing, "expires=<YYYY-MM-DD>")
	}
	if d.Reason == "" {
		missing = append(missing, "reason")
	}
	if len(missing) > 0 {
		return "has no " + strings.Join(missing, ", no ")
	}
	exp, err := time.Parse(DateLayout, d.Expires)
	if err != nil {
		return fmt.Sprintf("has expires=%s, not a YYYY-MM-DD date", d.Expires)
	}
	day := civil(today)
	if exp.Before(day) {
		return fmt.Sprintf("expired on %s (today is %s)", d.Expires, day.Format(DateLayout))
	}
	if limit := day.AddDate(0, MaxExceptionLife, 0); exp.After(limit) {
		return fmt.Sprintf("expires %s, more than two quarters ahead (latest %s)", d.Expires, limit.Format(DateLayout))
	}
	return ""
}

// civil is t's calendar date at midnight UTC, as time.Parse returns dates.
func civil(t time.Time) time.Time {
	y, m, dd := t.Date()
	return time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
}

// Covers reports whether the directive silences a diagnostic at file:line: its
// own line or the next one.
func (d *Directive) Covers(file string, line int) bool {
	return d.File == file && (d.Line == line || d.Line == line-1)
}
