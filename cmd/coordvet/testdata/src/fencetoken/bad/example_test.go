package bad

import (
	"context"
	"testing"

	"github.com/coordkit/coordkit/correctnesslease"
)

// Examples are checked: users copy them.
func Example_unfenced() {
	ctx := context.Background()
	var s *correctnesslease.Session
	l, _ := correctnesslease.Acquire(ctx, s, "billing") // want `the token of l \(from Acquire\) reaches no write`
	defer l.Release(ctx)
	_ = chargeUnfenced(ctx)
}

// Tests are not: holding a lease only to contend for it is fine there.
func TestContention(t *testing.T) {
	ctx := context.Background()
	var s *correctnesslease.Session
	l, _ := correctnesslease.Acquire(ctx, s, "billing")
	defer l.Release(ctx)
	if _, err := correctnesslease.TryAcquire(ctx, s, "billing"); err == nil {
		t.Fatal("second holder")
	}
}
