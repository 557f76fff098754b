package vetutil

import (
	"fmt"
	"go/parser"
	"go/token"
	"strings"
)

// Doc extracts an analyzer's documentation from the source of its doc.go: the
// package comment's text after the "# Analyzer <name>" heading, up to the next
// heading, without the "<name>: " that starts it (the x/tools convention). doc.go is the single source; the analyzer's Doc and docs/vet.md are
// both derived from it. Doc panics if the heading is missing, so a broken doc.go
// fails every test of the analyzer.
func Doc(src, name string) string {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", src, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil || f.Doc == nil {
		panic(fmt.Sprintf("coordvet: doc.go of %s: no package comment (%v)", name, err))
	}
	text := f.Doc.Text()
	_, rest, ok := strings.Cut(text, "# Analyzer "+name+"\n")
	if !ok {
		panic(fmt.Sprintf("coordvet: doc.go of %s: no %q heading", name, "# Analyzer "+name))
	}
	if i := strings.Index(rest, "\n# "); i >= 0 {
		rest = rest[:i+1]
	}
	rest = strings.TrimSpace(rest)
	summary, ok := strings.CutPrefix(rest, name+": ")
	if !ok {
		panic(fmt.Sprintf("coordvet: doc.go of %s: the section must start with %q", name, name+": <summary>"))
	}
	return summary
}
