package efficiencydecl_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/efficiencydecl"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

func TestEfficiencyDecl(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), efficiencydecl.Analyzer,
		"efficiencydecl/bad", "efficiencydecl/good", "github.com/coordkit/coordkit/efficiencylock")
}
