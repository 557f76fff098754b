package fencetoken_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/fencetoken"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

func TestFenceToken(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), fencetoken.Analyzer,
		"fencetoken/bad", "fencetoken/good", "fencetoken/flow", "github.com/coordkit/coordkit/correctnesslease")
}
