package pavedroad_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/pavedroad"
)

func TestPavedRoad(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), pavedroad.Analyzer,
		"pavedroad/bad", "pavedroad/redsyncuse", "pavedroad/good", "pavedroad/gen", "github.com/coordkit/coordkit/bench")
}
