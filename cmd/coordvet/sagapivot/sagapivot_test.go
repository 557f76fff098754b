package sagapivot_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/sagapivot"
)

func TestSagaPivot(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), sagapivot.Analyzer,
		"sagapivot/bad", "sagapivot/good", "github.com/coordkit/coordkit/saga")
}
