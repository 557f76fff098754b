package plugin

import (
	"fmt"
	"go/ast"
	"go/token"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// noLint finds the //nolint ranges golangci-lint would apply to coordvet's
// issues (a bare //nolint, //nolint:all, //nolint:coordvet), so the plugin can
// keep honouring only coordvet's own directive: a diagnostic inside such a range
// is reported at the file's package clause instead, saying where it belongs.
type noLint struct {
	fset   *token.FileSet
	ranges map[string][][2]int // file -> [from, to] lines
	pkgPos map[string]token.Pos
}

func newNoLint(pass *analysis.Pass) *noLint {
	nl := &noLint{fset: pass.Fset, ranges: map[string][][2]int{}, pkgPos: map[string]token.Pos{}}
	for _, f := range pass.Files {
		name := pass.Fset.File(f.FileStart).Name()
		nl.pkgPos[name] = f.Package
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				if !silencesCoordvet(c.Text) {
					continue
				}
				line := pass.Fset.Position(c.Slash).Line
				from, to := line, line
				if end := nodeAfter(pass.Fset, f, line); end > 0 {
					to = end
				}
				nl.ranges[name] = append(nl.ranges[name], [2]int{from, to})
			}
		}
	}
	return nl
}

// silencesCoordvet reports whether a comment is a golangci-lint nolint
// directive that covers the coordvet linter.
func silencesCoordvet(text string) bool {
	rest, ok := strings.CutPrefix(text, "//nolint")
	if !ok {
		return false
	}
	if rest == "" || rest[0] == ' ' || rest[0] == '\t' {
		return true // bare //nolint: every linter
	}
	list, ok := strings.CutPrefix(rest, ":")
	if !ok {
		return false
	}
	if i := strings.IndexAny(list, " \t/"); i >= 0 {
		list = list[:i]
	}
	for _, l := range strings.Split(list, ",") {
		if l == "all" || l == Name {
			return true
		}
	}
	return false
}

// nodeAfter returns the last line of the outermost declaration or statement
// that starts on the line after a comment standing alone (golangci-lint widens
// such a directive to that node), or 0. A directive above the package clause
// covers the whole file.
func nodeAfter(fset *token.FileSet, f *ast.File, line int) int {
	if fset.Position(f.Package).Line == line+1 {
		return fset.Position(f.FileEnd).Line
	}
	end := 0
	ast.Inspect(f, func(n ast.Node) bool {
		if n == nil || end > 0 {
			return false
		}
		switch n.(type) {
		case ast.Decl, ast.Stmt, ast.Spec, *ast.Field:
			if fset.Position(n.Pos()).Line == line+1 {
				end = fset.Position(n.End()).Line
				return false
			}
		}
		return fset.Position(n.Pos()).Line <= line+1
	})
	return end
}

// escape moves a diagnostic that a //nolint would silence to the package
// clause of its file, naming its own line.
func (nl *noLint) escape(d analysis.Diagnostic) analysis.Diagnostic {
	p := nl.fset.Position(d.Pos)
	for _, r := range nl.ranges[p.Filename] {
		if p.Line < r[0] || p.Line > r[1] {
			continue
		}
		pkg := nl.pkgPos[p.Filename]
		if pkg == token.NoPos || nl.fset.Position(pkg).Line >= r[0] && nl.fset.Position(pkg).Line <= r[1] {
			return d // a file-wide //nolint: nothing in the file escapes it
		}
		d.Related = append([]analysis.RelatedInformation{{Pos: d.Pos, End: d.End, Message: "the finding"}}, d.Related...)
		d.Message = fmt.Sprintf("line %d: %s [//nolint does not silence coordvet; use //coordvet:ignore]", p.Line, d.Message)
		d.Pos, d.End, d.SuggestedFixes = pkg, token.NoPos, nil
		return d
	}
	return d
}
