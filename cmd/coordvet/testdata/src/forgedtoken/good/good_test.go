package good

import (
	"testing"

	"github.com/coordkit/coordkit/coord"
)

func TestZero(t *testing.T) {
	var want coord.Token
	if zero() != want {
		t.Fatal("zero")
	}
}
