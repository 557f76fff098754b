package bad

import (
	"testing"

	"github.com/coordkit/coordkit/coord"
)

func TestZero(t *testing.T) {
	if (coord.Token{}) != zero() { // want `comparing with the coord.Token\{\} literal; fix: use !zero\(\).IsZero\(\)`
		t.Fatal("zero")
	}
}
