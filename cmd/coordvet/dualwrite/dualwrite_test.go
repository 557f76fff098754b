package dualwrite_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/coordkit/coordkit/cmd/coordvet/dualwrite"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/effects"
	"github.com/coordkit/coordkit/cmd/coordvet/internal/vettest"
)

// TestBrokersFlag extends the broker list the way -dualwrite.brokers does.
func TestBrokersFlag(t *testing.T) {
	a := dualwrite.New(effects.NewSet())
	if err := a.Flags.Set("brokers", "example.com/bus:Client.Send"); err != nil {
		t.Fatal(err)
	}
	if got := a.Flags.Lookup("brokers").Value.String(); got != "example.com/bus:Client.Send" {
		t.Fatalf("-brokers reads back %q", got)
	}
	analysistest.Run(t, vettest.TestData(t), a, "dualwrite/custom")
}

func TestMalformedEntries(t *testing.T) {
	for _, bad := range []string{"nocolon", "example.com/bus:", ":Send", "example.com/bus:.Send", "example.com/bus:A.B.C"} {
		a := dualwrite.New(effects.NewSet())
		if err := a.Flags.Lookup("commits").Value.Set(bad); err == nil {
			t.Errorf("-commits accepted %q", bad)
		}
		if err := a.Flags.Lookup("brokers").Value.Set(bad); err == nil {
			t.Errorf("-brokers accepted %q", bad)
		}
	}
}
