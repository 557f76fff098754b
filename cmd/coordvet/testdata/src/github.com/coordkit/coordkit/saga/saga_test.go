package saga

import (
	"context"
	"testing"
)

// The package's own tests build invalid definitions on purpose.
func TestRejectsNoPivot(t *testing.T) {
	noop := func(ctx context.Context, s *int) error { return nil }
	if _, err := New("bad", Retriable("x", noop)); err != nil {
		t.Log(err)
	}
}
