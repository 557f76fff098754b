package bad

import (
	"testing"

	"github.com/coordkit/coordkit/coord"
)

func TestZero(t *testing.T) {
	if (coord.Token{}) != zero() { // want `coord.Token composite literal`
		t.Fatal("zero")
	}
}
