package failstatic_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestKeyClassFailsClosedOnFakeClock starts from disk with etcd blackholed and a
// fake clock, then moves time past the class's MaxStaleness: that class fails
// closed (Lookup and GetClass), everything else keeps serving.
func TestKeyClassFailsClosedOnFakeClock(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"flags/a", "on")
	put(t, cli, prefix+"revocations/r1", "revoked")
	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	first := mustNew(t, cli, cfg)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	proxy := coordtest.NewProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	proxy.Blackhole()
	clock := coordtest.NewFakeClock(time.Now())
	cfg.Clock = clock
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: 30 * time.Second}}
	c := mustNew(t, coordtest.NewEtcdClient(t, proxy.URL()), cfg)
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
