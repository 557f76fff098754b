package bad

import (
	"testing"

	"github.com/coordkit/coordkit/efficiencylock"
)

func TestLock(t *testing.T) {
	if _, err := efficiencylock.New(nil, efficiencylock.DuplicatesHarmless(t.Name()), efficiencylock.Config{}); err != nil { // want `not a constant string`
		t.Fatal(err)
	}
}
