// Package plugin is the golangci-lint v2 module plugin of coordvet. Importing
// it registers the linter "coordvet" with golangci-lint's plugin registry; see
// docs/vet.md#golangci-lint for the offline build that links it in.
package plugin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/coordkit/coordkit/cmd/coordvet/suite"
)

// Name is the linter name to enable in .golangci.yml.
const Name = "coordvet"

func init() { register.Plugin(Name, New) }

// Settings are the linters-settings.custom.coordvet.settings of .golangci.yml.
// Unknown keys are an error, so a typo does not silently switch a check off.
type Settings struct {
	// Disable lists checks not to run (e.g. ["sagapivot"]). Default: none; every
	// check runs.
	Disable []string `json:"disable"`
	// Brokers adds publish calls to dualwrite, as importpath:Name or
	// importpath:Type.Name. Default: none beyond the built-in table.
	Brokers []string `json:"brokers"`
	// Commits adds transaction commits to dualwrite, same form. Default: none
	// beyond the built-in table.
	Commits []string `json:"commits"`
}

// Plugin is the coordvet linter as golangci-lint sees it.
type Plugin struct {
	settings Settings
}

var _ register.LinterPlugin = (*Plugin)(nil)

// New decodes and validates the settings golangci-lint passes (nil for none).
// It returns an error for an unknown key, an unknown check in Disable or a
// malformed broker or commit entry.
func New(settings any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](settings)
	if err != nil {
		return nil, fmt.Errorf("coordvet: %w", err)
	}
	names := map[string]bool{}
	for _, a := range suite.Analyzers() {
		names[a.Name] = true
	}
	for _, d := range s.Disable {
		if !names[d] {
			return nil, fmt.Errorf("coordvet: settings.disable: unknown check %q", d)
		}
	}
	if _, err := suite.New(suite.Config{Brokers: s.Brokers, Commits: s.Commits}); err != nil {
		return nil, fmt.Errorf("coordvet: settings: %w", err)
	}
	return &Plugin{settings: s}, nil
}

// BuildAnalyzers returns the enabled checks over a fresh effects set carrying
// the configured brokers and commits. Each is a copy of the check whose
// diagnostics lose the "<check>: " prefix (golangci-lint prints the name) and
// survive //nolint (see noLint); Requires, FactTypes and ResultType are the
// check's, so facts flow as under go vet.
func (p *Plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	all, err := suite.New(suite.Config{Brokers: p.settings.Brokers, Commits: p.settings.Commits})
	if err != nil {
		return nil, err
	}
	var out []*analysis.Analyzer
	for _, a := range all {
		if slices.Contains(p.settings.Disable, a.Name) {
			continue
		}
		out = append(out, wrap(a))
	}
	return out, nil
}

// wrap returns a copy of a whose diagnostics do not start with "<check>: " and
// are moved out of any //nolint range.
func wrap(a *analysis.Analyzer) *analysis.Analyzer {
	wrapped := *a
	run := a.Run
	wrapped.Run = func(pass *analysis.Pass) (any, error) {
		inner := *pass
		nl := newNoLint(pass)
		inner.Report = func(d analysis.Diagnostic) {
			d.Message = strings.TrimPrefix(d.Message, a.Name+": ")
			pass.Report(nl.escape(d))
		}
		return run(&inner)
	}
	return &wrapped
}

// GetLoadMode asks golangci-lint for type information, which every check needs.
func (p *Plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
