package schedulefire_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
	"github.com/coordkit/coordkit/cmd/coordvet/schedulefire"
)

func TestScheduleFire(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), schedulefire.Analyzer, "schedulefire/bad", "schedulefire/good")
}
