// Package suite assembles the coordvet analyzers, for the coordvet command and
// the golangci-lint plugin.
package suite

import (
	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/dualwrite"
	"github.com/coordkit/coordkit/cmd/coordvet/efficiencydecl"
	"github.com/coordkit/coordkit/cmd/coordvet/fencetoken"
	"github.com/coordkit/coordkit/cmd/coordvet/forgedtoken"
	"github.com/coordkit/coordkit/cmd/coordvet/ignoredirective"
	"github.com/coordkit/coordkit/cmd/coordvet/pavedroad"
	"github.com/coordkit/coordkit/cmd/coordvet/sagapivot"
)

// Analyzers returns every coordvet analyzer, in documentation order. dualwrite
// is the package's shared instance, configured by its command-line flags.
func Analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		pavedroad.Analyzer,
		fencetoken.Analyzer,
		forgedtoken.Analyzer,
		efficiencydecl.Analyzer,
		dualwrite.Analyzer,
		sagapivot.Analyzer,
		ignoredirective.Analyzer,
	}
}
