package watchplane

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestIdleRootClosedAtAProbeTick: the plane's last root goes idle, and its
// IdleTimeout ends at the tick its probe is due. The housekeeping loop closes
// the root and then probes: with no root left it must not probe (it indexed the
// first root of an empty list and crashed the process — seen under load in
// pgfence's cluster test, "index out of range [0] with length 0" in probe), and
// the plane serves the next subscriber.
func TestIdleRootClosedAtAProbeTick(t *testing.T) {
	_, cli := newEtcd(t)
	clk := coordtest.NewFakeClock(time.Now())
	p := New(cli, Config{Clock: clk, IdleTimeout: DefaultProbeInterval})
	defer p.Close()
	key := tenantPrefix(t) + "config/x"
	s, err := p.Subscribe(Spec{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	next(t, s, "the first resync")
	s.Close() // idle from now; the next probe is due DefaultProbeInterval from the first, at the same fake time
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clk.WaitTimers(ctx, 1); err != nil {
		t.Fatalf("the housekeeping loop armed no timer within 10 s: %v", err)
	}
	clk.Advance(DefaultProbeInterval)
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the idle root closed", func() bool { return len(p.rootList()) == 0 })
	s2, err := p.Subscribe(Spec{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	next(t, s2, "the first resync of a subscriber after the idle root closed")
}
