package bad

import (
	"testing"

	"github.com/coordkit/coordkit/coord"
)

func TestZero(t *testing.T) {
	if (coord.Token{}) != zero() { // a zero check: no token is built
		t.Fatal("zero")
	}
	_ = []coord.Token{{}} // want `a coord.Token composite literal builds a token no lease granted`
}
