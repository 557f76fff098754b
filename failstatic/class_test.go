package failstatic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestKeyClassFailsClosedOnFakeClock starts from disk with etcd blackholed and a
// fake clock, then moves time past the class's MaxStaleness: that class fails
// closed (Lookup and GetClass), everything else keeps serving.
func TestKeyClassFailsClosedOnFakeClock(t *testing.T) {
	etcd, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"flags/a", "on")
	put(t, cli, prefix+"revocations/r1", "revoked")
	cfg, _ := withState(t, cli, baseConfig(prefix))

	down, proxy := blackholed(t, etcd)
	clock := coordtest.NewFakeClock(time.Now())
	cfg.Clock = clock
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: 30 * time.Second}}
	c := mustNew(t, down, cfg)
	if s := c.Get(); s.Source != failstatic.SourceDisk {
		t.Fatalf("source %v, want disk", s.Source)
	}
	if _, err := c.Lookup(prefix + "revocations/r1"); err != nil {
		t.Fatalf("fresh revocation lookup: %v", err)
	}
	if _, err := c.GetClass("revocations"); err != nil {
		t.Fatalf("fresh GetClass: %v", err)
	}
	before := c.Staleness()
	clock.Advance(31 * time.Second)
	if got := c.Staleness() - before; got != 31*time.Second {
		t.Fatalf("staleness grew by %v on a 31 s advance", got)
	}
	_, err := c.Lookup(prefix + "revocations/r1")
	var se *failstatic.StaleError
	if !errors.As(err, &se) || !errors.Is(err, failstatic.ErrStale) || se.Class != "revocations" || se.Max != 30*time.Second {
		t.Fatalf("stale revocation lookup: %v", err)
	}
	if _, err := c.GetClass("revocations"); !errors.Is(err, failstatic.ErrStale) {
		t.Fatalf("stale GetClass: %v", err)
	}
	if kv, err := c.Lookup(prefix + "flags/a"); err != nil || string(kv.Value) != "on" {
		t.Fatalf("unclassed key while stale: %+v, %v", kv, err)
	}
	if _, err := c.GetClass("nope"); !errors.Is(err, failstatic.ErrNotFound) {
		t.Fatalf("unknown class: %v", err)
	}
	if st := proxy.Stats(); st.Blackholes != 1 {
		t.Fatalf("blackhole not injected: %+v", st)
	}
}

// The wall clock went back across a restart: the state file says it was confirmed
// 10 s in the future. That time cannot be trusted, so the snapshot's staleness is
// unknown and a fail-closed class refuses it — it must never read as fresh.
func TestFutureConfirmationTimeCountsAsStale(t *testing.T) {
	etcd, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"revocations/r1", "revoked")
	cfg := baseConfig(prefix)
	// The process that wrote the file ran on a clock 10 s ahead of the next one.
	cfg.Clock = coordtest.NewFakeClock(time.Now().Add(10 * time.Second))
	cfg, _ = withState(t, cli, cfg)

	down, proxy := blackholed(t, etcd)
	cfg.Clock = nil // the system clock, now "behind" the file
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: 2 * time.Second}}
	c := mustNew(t, down, cfg)
	if s := c.Get(); s.Source != failstatic.SourceDisk {
		t.Fatalf("source %v, want disk (etcd is blackholed)", s.Source)
	}
	if _, err := c.Lookup(prefix + "revocations/r1"); !errors.Is(err, failstatic.ErrStale) {
		t.Fatalf("Lookup in a fail-closed class with a future confirmation time: %v, want ErrStale", err)
	}
	if _, err := c.GetClass("revocations"); !errors.Is(err, failstatic.ErrStale) {
		t.Fatalf("GetClass: %v, want ErrStale", err)
	}
	if s := c.Staleness(); s < failstatic.UnknownStaleness {
		t.Fatalf("Staleness() = %v, want at least UnknownStaleness", s)
	}
	if st := proxy.Stats(); st.Blackholes != 1 {
		t.Fatalf("blackhole not injected: %+v", st)
	}
}
