package efficiencylock

import "testing"

// The package's own tests may build invalid reasons to test rejection.
func TestEmptyReason(t *testing.T) {
	if _, err := New(nil, DuplicatesHarmless(""), Config{}); err != nil {
		t.Log(err)
	}
}
