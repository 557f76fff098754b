package vetutil

import "golang.org/x/tools/go/analysis"

// NewCheck is one coordvet check: named name, documented by the "# Analyzer
// <name>" section of its package's doc.go (src), linked to its section of
// docs/vet.md (anchor), reporting Findings, after the exceptions and any other
// analyzers it requires.
func NewCheck(name, src, anchor string, run func(*analysis.Pass) (any, error), requires ...*analysis.Analyzer) *analysis.Analyzer {
	return &analysis.Analyzer{
		Name:       name,
		Doc:        Doc(src, name),
		URL:        DocURL + "#" + anchor,
		Requires:   append([]*analysis.Analyzer{Exceptions}, requires...),
		ResultType: FindingsType,
		Run:        run,
	}
}
