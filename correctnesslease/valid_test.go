package correctnesslease

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestLeaseValid: Valid is true while held and false from the renewal deadline
// on (on the session clock, whether or not the renewal loop has run since),
// and after Release.
func TestLeaseValid(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	clk := coordtest.NewFakeClock(time.Now())
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL, Clock: clk})
	if s.Tenant() != coordtest.Tenant(t) {
		t.Fatalf("Tenant() = %q", s.Tenant())
	}
	a, err := Acquire(ctx, s, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Acquire(ctx, s, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Valid() || !b.Valid() {
		t.Fatal("Valid() = false right after Acquire")
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if b.Valid() {
		t.Fatal("Valid() = true after Release")
	}
	clk.Advance(testTTL * 2 / 3) // no keepalive sent since the grant: deadline reached
	if a.Valid() {
		t.Fatal("Valid() = true at the renewal deadline")
	}
	waitDone(t, s.Done(), 10*time.Second, "session step-down after Valid saw the deadline")
	if a.Valid() {
		t.Fatal("Valid() = true after step-down")
	}
}
