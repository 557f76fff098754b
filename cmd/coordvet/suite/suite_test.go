package suite_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/suite"
)

// testdata lists, for every check of the suite, the packages of
// cmd/coordvet/testdata/src it is run on: a firing and a passing case for every
// diagnostic, and the SDK stub the check exempts. The checks' other cases
// (flags, suggested fixes, exceptions) are tested in their own packages.
var testdata = map[string][]string{
	"pavedroad":       {"pavedroad/bad", "pavedroad/redsyncuse", "pavedroad/good", "pavedroad/gen", "github.com/coordkit/coordkit/bench"},
	"fencetoken":      {"fencetoken/bad", "fencetoken/good", "fencetoken/flow", "github.com/coordkit/coordkit/correctnesslease"},
	"forgedtoken":     {"forgedtoken/bad", "forgedtoken/good", "forgedtoken/parse", "github.com/coordkit/coordkit/correctnesslease/mint"},
	"efficiencydecl":  {"efficiencydecl/bad", "efficiencydecl/good", "github.com/coordkit/coordkit/efficiencylock"},
	"dualwrite":       {"dualwrite/bad", "dualwrite/good", "dualwrite/deep", "dualwrite/iface", "dualwrite/units", "github.com/coordkit/coordkit/outbox/relay"},
	"sagapivot":       {"sagapivot/bad", "sagapivot/good", "github.com/coordkit/coordkit/saga"},
	"schedulefire":    {"schedulefire/bad", "schedulefire/good"},
	"ignoredirective": {"ignoredirective/a", "ignoredirective/gen"},
}

// TestAnalyzers runs every check of the suite over its analysistest cases; a
// check added to the suite without cases fails here.
func TestAnalyzers(t *testing.T) {
	analyzers := suite.Analyzers()
	if len(analyzers) != len(testdata) {
		t.Errorf("the suite has %d checks, testdata lists %d", len(analyzers), len(testdata))
	}
	for _, a := range analyzers {
		t.Run(a.Name, func(t *testing.T) {
			pkgs, ok := testdata[a.Name]
			if !ok {
				t.Fatalf("no analysistest cases listed for %s", a.Name)
			}
			analysistest.Run(t, vettest.TestData(t), a, pkgs...)
		})
	}
}
