package failstatic_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// The wall clock went back across a restart: the state file says it was confirmed
// 10 s in the future. That time cannot be trusted, so the snapshot's staleness is
// unknown and a fail-closed class refuses it — it must never read as fresh.
func TestFutureConfirmationTimeCountsAsStale(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"revocations/r1", "revoked")
	cfg := baseConfig(prefix)
	cfg.StatePath = filepath.Join(t.TempDir(), "state")
	// The process that wrote the file ran on a clock 10 s ahead of the next one.
	cfg.Clock = coordtest.NewFakeClock(time.Now().Add(10 * time.Second))
	first := mustNew(t, cli, cfg)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	proxy := coordtest.NewProxy(t, strings.TrimPrefix(etcd.Endpoints[0], "http://"))
	proxy.Blackhole()
	cfg.Clock = nil // the system clock, now "behind" the file
	cfg.Classes = []failstatic.KeyClass{{Name: "revocations", Prefix: "revocations/", MaxStaleness: 2 * time.Second}}
	c := mustNew(t, coordtest.NewEtcdClient(t, proxy.URL()), cfg)
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

// A Prefix under /tenants/ must name one whole tenant: "/tenants/t1" would also
// watch tenant t10.
func TestPrefixMustNameOneTenant(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	put(t, cli, "/tenants/t10/config/secret", "t10's")
	for _, p := range []string{"/tenants/t1", "/tenants/", "/tenants", "/ten", "/", "/tenants/t1 /config/"} {
		cfg := baseConfig(p)
		cfg.InitialTimeout = time.Second
		c, err := failstatic.New(context.Background(), cli, cfg)
		var ce *failstatic.ConfigError
		if err == nil {
			leak := c.Get().Value["/tenants/t10/config/secret"]
			c.Close()
			t.Errorf("Prefix %q accepted (serving %q)", p, leak)
			continue
		}
		if !errors.As(err, &ce) || ce.Field != "Prefix" || !errors.Is(err, failstatic.ErrInvalidConfig) {
			t.Errorf("Prefix %q: %v, want a *ConfigError for Prefix", p, err)
		}
	}
	for _, p := range []string{"/tenants/t1/", "/tenants/t1/config/", "/tenants/t1/config/feature-", "/platform/flags"} {
		cfg := baseConfig(p)
		cfg.InitialTimeout = 5 * time.Second
		c, err := failstatic.New(context.Background(), cli, cfg)
		if err != nil {
			t.Errorf("Prefix %q: %v, want it accepted", p, err)
			continue
		}
		if v, ok := c.Get().Value["/tenants/t10/config/secret"]; ok {
			t.Errorf("Prefix %q serves t10's key %q", p, v)
		}
		c.Close()
	}
}

// A subscriber slower than the updates does not queue them without bound: what
// arrives while it is busy is coalesced into one update — the latest snapshot and,
// per key, its latest change — and counted.
func TestSlowSubscriberIsCoalesced(t *testing.T) {
	etcd := coordtest.Etcd(t)
	cli := etcd.Client(t)
	prefix := testPrefix(t)
	put(t, cli, prefix+"k0", "v")
	c := mustNew(t, cli, baseConfig(prefix))
	start := c.Get().Value

	release := make(chan struct{})
	var (
		mu    sync.Mutex
		calls int
		state = maps.Clone(start)
		last  int64
	)
	done := make(chan struct{}, 1)
	stop := c.Subscribe(func(s failstatic.Snapshot[conf], changes []failstatic.Change) {
		mu.Lock()
		calls++
		first := calls == 1
		for _, ch := range changes {
			if ch.Deleted {
				delete(state, ch.Key)
			} else {
				state[ch.Key] = string(ch.Value)
			}
		}
		last = s.Revision
		mu.Unlock()
		if first {
			<-release // a slow subscriber: busy while the updates below arrive
		}
		select {
		case done <- struct{}{}:
		default:
		}
	})
	defer stop()

	const updates = 60
	var rev int64
	revisions := 0 // the updates that made a revision (deleting a missing key makes none)
	for i := range updates {
		prev := rev
		k := prefix + "k" + strconv.Itoa(i%7)
		if i%5 == 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			r, err := cli.Delete(ctx, k)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			rev = r.Header.Revision
		} else {
			rev = put(t, cli, k, strconv.Itoa(i))
		}
		// One adoption per update: unpaced, a loaded machine's watch delivered the
		// updates in two or three batches, adopted as that many snapshots, and
		// there was nothing to coalesce (Coalesced = 0).
		coordtest.Until(t, 10*time.Second, 5*time.Millisecond, fmt.Sprintf("the cache to adopt update %d (revision %d)", i, rev), func() bool { return c.Get().Revision >= rev })
		if rev > prev {
			revisions++
		}
	}
	close(release)
	coordtest.Until(t, 30*time.Second, 5*time.Millisecond, "the subscriber to receive the last update", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return last >= rev
	})
	want, _ := etcdState(t, cli, prefix)
	mu.Lock()
	defer mu.Unlock()
	if calls > 3 {
		t.Fatalf("subscriber called %d times for %d updates while it was busy: not coalesced", calls, updates)
	}
	if !equalConf(state, want) {
		t.Fatalf("state rebuilt from the coalesced changes %v, want %v", state, want)
	}
	// The first revision's call held the subscriber; of the other revisions, at
	// most one found nothing pending: every other was merged.
	if n := c.Status().Coalesced; n < int64(revisions-2) {
		t.Fatalf("Status().Coalesced = %d after %d revisions adopted one by one and %d calls: the merges are not counted", n, revisions, calls)
	}
}
