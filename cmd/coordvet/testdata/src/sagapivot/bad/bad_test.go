package bad

import (
	"testing"

	"github.com/coordkit/coordkit/saga"
)

func TestDefinition(t *testing.T) {
	if _, err := saga.New("t", saga.Compensatable("reserve", reserve, release)); err != nil { // want `saga definition without a pivot`
		t.Fatal(err)
	}
}
