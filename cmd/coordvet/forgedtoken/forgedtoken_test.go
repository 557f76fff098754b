package forgedtoken_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/forgedtoken"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

func TestForgedToken(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), forgedtoken.Analyzer,
		"forgedtoken/bad", "forgedtoken/good", "forgedtoken/parse", "github.com/coordkit/coordkit/correctnesslease/mint")
}
