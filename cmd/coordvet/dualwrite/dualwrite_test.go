package dualwrite_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/dualwrite"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

func TestDualWrite(t *testing.T) {
	analysistest.Run(t, vettest.TestData(t), dualwrite.Analyzer,
		"dualwrite/bad", "dualwrite/good", "github.com/coordkit/coordkit/outbox/relay")
}

// TestBrokersFlag extends the broker list the way -dualwrite.brokers does.
func TestBrokersFlag(t *testing.T) {
	a, err := dualwrite.New(dualwrite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Flags.Set("brokers", "example.com/bus:Client.Send"); err != nil {
		t.Fatal(err)
	}
	analysistest.Run(t, vettest.TestData(t), a, "dualwrite/custom")
}

func TestMalformedEntries(t *testing.T) {
	for _, bad := range []string{"nocolon", "example.com/bus:", ":Send", "example.com/bus:.Send", "example.com/bus:A.B.C"} {
		if _, err := dualwrite.New(dualwrite.Config{Brokers: []string{bad}}); err == nil {
			t.Errorf("New accepted broker entry %q", bad)
		}
		a := dualwrite.Analyzer
		if err := a.Flags.Lookup("commits").Value.Set(bad); err == nil {
			t.Errorf("-commits accepted %q", bad)
		}
	}
}
