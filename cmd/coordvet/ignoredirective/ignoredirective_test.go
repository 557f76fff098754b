package ignoredirective_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/ignoredirective"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

func TestIgnoreDirective(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), ignoredirective.Analyzer, "ignoredirective/a", "ignoredirective/gen")
}
