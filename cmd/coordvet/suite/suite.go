// Package suite assembles the coordvet analyzers, for the coordvet command and
// the golangci-lint plugin.
package suite

import (
	"strings"

	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/dualwrite"
	"github.com/coordkit/coordkit/cmd/coordvet/efficiencydecl"
	"github.com/coordkit/coordkit/cmd/coordvet/fencetoken"
	"github.com/coordkit/coordkit/cmd/coordvet/forgedtoken"
	"github.com/coordkit/coordkit/cmd/coordvet/ignoredirective"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/pavedroad"
	"github.com/coordkit/coordkit/cmd/coordvet/sagapivot"
	"github.com/coordkit/coordkit/cmd/coordvet/schedulefire"
)

// Analyzers returns every coordvet check, in documentation order: the
// package-level instances, sharing effects.Default (the coordvet command's
// -dualwrite.brokers and -dualwrite.commits flags add to its table).
func Analyzers() []*analysis.Analyzer {
	return []*analysis.Analyzer{
		pavedroad.Analyzer,
		fencetoken.Analyzer,
		forgedtoken.Analyzer,
		efficiencydecl.Analyzer,
		dualwrite.Analyzer,
		sagapivot.Analyzer,
		schedulefire.Analyzer,
		ignoredirective.Analyzer,
	}
}

// Config extends the built-in table of publishes and commits.
type Config struct {
	// Brokers are extra publish calls, importpath:Name or importpath:Type.Name.
	// Default: none beyond the built-in table.
	Brokers []string
	// Commits are extra transaction commits, same form. Default: none.
	Commits []string
}

// New returns every check as Analyzers does, but over a fresh effects set that
// holds cfg's entries. It fails on a malformed entry.
func New(cfg Config) ([]*analysis.Analyzer, error) {
	s := effects.NewSet()
	if err := s.Table.Add(effects.Publish, strings.Join(cfg.Brokers, ",")); err != nil {
		return nil, err
	}
	if err := s.Table.Add(effects.Commit, strings.Join(cfg.Commits, ",")); err != nil {
		return nil, err
	}
	return []*analysis.Analyzer{
		pavedroad.Analyzer,
		fencetoken.New(s),
		forgedtoken.Analyzer,
		efficiencydecl.Analyzer,
		dualwrite.New(s),
		sagapivot.Analyzer,
		schedulefire.Analyzer,
		ignoredirective.Analyzer,
	}, nil
}
