package watchplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestRootOf(t *testing.T) {
	for key, want := range map[string]string{
		"/tenants/a/elections/x/1f":     "/tenants/a/elections/",
		"/tenants/a/members/svc/":       "/tenants/a/members/",
		"/tenants/a/config/flags":       "/tenants/a/config/",
		"/tenants/a/config/":            "/tenants/a/config/",
		"/tenants/a/":                   "/tenants/a/",
		"/tenants/a":                    "/tenants/a",
		"/app/flags":                    "/app/flags",
		"/tenants/bad name/config/x":    "/tenants/bad name/config/x",
		"/tenants/a/ownership/g/target": "/tenants/a/ownership/",
	} {
		if got := RootOf(key); got != want {
			t.Errorf("RootOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestOneUpstreamWatchPerRoot: 200 subscriptions of keys and prefixes under one
// tenant kind cost etcd one watcher (its own gauge), where 200 clientv3
// watches of the same keys cost 200 — the measurement that can fail.
func TestOneUpstreamWatchPerRoot(t *testing.T) {
	// A spawned etcd: an embedded one shares its gauge with the other embedded
	// servers of the test process, still closing.
	e := coordtest.EtcdCluster(t, 1, nil)
	cli := e.Client(t)
	tp := tenantPrefix(t)
	base := serverWatchers(t, e.Endpoints()[0])
	p := New(cli, Config{})
	defer p.Close()
	var subs []*Sub
	for i := range 200 {
		spec := Spec{Key: fmt.Sprintf("%selections/lease-%d/%x", tp, i, i), From: 0}
		if i%10 == 0 {
			spec = Spec{Key: fmt.Sprintf("%selections/lease-%d/", tp, i), Prefix: true}
		}
		s, err := p.Subscribe(spec)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	for _, s := range subs {
		next(t, s, "the first resync")
	}
	// The first list comes before the watch: wait for the watch (etcd counts
	// its watcher before it confirms it).
	coordtest.Until(t, 10*time.Second, 10*time.Millisecond, "the root's watch open", func() bool { return subs[0].Health().Watching })
	if st := p.Stats(); st.Roots != 1 || st.Subscriptions != 200 {
		t.Fatalf("stats %+v, want 1 root and 200 subscriptions", st)
	}
	if got := serverWatchers(t, e.Endpoints()[0]) - base; got != 1 {
		t.Fatalf("etcd holds %d more watchers, want 1", got)
	}
	// The same keys watched the plain way.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plain := 0
	for i := range 200 {
		cli.Watcher.Watch(ctx, fmt.Sprintf("%selections/lease-%d/%x", tp, i, i))
		plain++
	}
	if got := serverWatchers(t, e.Endpoints()[0]) - base - 1; got != plain {
		t.Fatalf("200 plain watches added %d watchers: the measurement does not count watches", got)
	}
	for _, s := range subs {
		s.Close()
	}
}

// TestEveryEventInOrderToItsRange: each subscription receives exactly the events
// of its key or prefix, in revision order, after a resync of the start state.
func TestEveryEventInOrderToItsRange(t *testing.T) {
	_, cli := newEtcd(t)
	tp := tenantPrefix(t)
	put(t, cli, tp+"config/a", "0")
	p := New(cli, Config{})
	defer p.Close()
	keyA, _ := p.Subscribe(Spec{Key: tp + "config/a"})
	all, _ := p.Subscribe(Spec{Key: tp + "config/", Prefix: true})
	onlyB, _ := p.Subscribe(Spec{Key: tp + "config/b"})
	for _, s := range []*Sub{keyA, all, onlyB} {
		next(t, s, "the first resync")
	}
	put(t, cli, tp+"config/a", "1")
	put(t, cli, tp+"config/b", "1")
	put(t, cli, tp+"members/x", "elsewhere") // another root
	del(t, cli, tp+"config/a")
	last := put(t, cli, tp+"config/b", "2")
	gotA := collect(t, keyA, last, "key a's events")
	gotAll := collect(t, all, last, "the prefix's events")
	gotB := collect(t, onlyB, last, "key b's events")
	a1, b1, b2, aDel := "PUT "+tp+"config/a=1", "PUT "+tp+"config/b=1", "PUT "+tp+"config/b=2", "DELETE "+tp+"config/a="
	for _, c := range []struct {
		name      string
		got, want []string
	}{
		{"key a", gotA, []string{a1, aDel}},
		{"key b", gotB, []string{b1, b2}},
		{"the prefix", gotAll, []string{a1, b1, aDel, b2}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
}

// TestResumeFromHistoryTouchesNothing: a subscriber that starts at a past
// revision still in the root's history gets exactly the events since, with no
// read and no new watch sent to etcd.
func TestResumeFromHistoryTouchesNothing(t *testing.T) {
	_, cli := newEtcd(t)
	c := count(cli)
	tp := tenantPrefix(t)
	p := New(cli, Config{})
	defer p.Close()
	first, _ := p.Subscribe(Spec{Key: tp + "members/", Prefix: true})
	next(t, first, "the first resync")
	from := put(t, cli, tp+"members/one", "1")
	put(t, cli, tp+"members/two", "2")
	last := del(t, cli, tp+"members/one")
	collect(t, first, last, "the first subscriber's events")
	gets, watches := c.gets.Load(), c.watches.Load()
	late, _ := p.Subscribe(Spec{Key: tp + "members/", Prefix: true, From: from})
	got := collect(t, late, last, "the late subscriber's replay")
	want := []string{"PUT " + tp + "members/one=1", "PUT " + tp + "members/two=2", "DELETE " + tp + "members/one="}
	if !slices.Equal(got, want) {
		t.Fatalf("replay %q, want %q", got, want)
	}
	if c.gets.Load() != gets || c.watches.Load() != watches {
		t.Fatalf("the replay sent %d reads and %d watches to etcd, want none", c.gets.Load()-gets, c.watches.Load()-watches)
	}
	// Before the history: a resync from the mirror, still without etcd.
	old, _ := p.Subscribe(Spec{Key: tp + "members/", Prefix: true, From: 1})
	u := next(t, old, "a resync for a revision before the history")
	_ = u
	small := New(cli, Config{History: 1})
	defer small.Close()
	s1, _ := small.Subscribe(Spec{Key: tp + "members/", Prefix: true})
	next(t, s1, "resync")
	r1 := put(t, cli, tp+"members/three", "3")
	put(t, cli, tp+"members/four", "4")
	collect(t, s1, r1+1, "events")
	s2, _ := small.Subscribe(Spec{Key: tp + "members/", Prefix: true, From: r1})
	if u := next(t, s2, "a resync: r1 left a one-event history"); !u.Resync || len(u.KVs) != 3 {
		t.Fatalf("want a resync with 3 keys, got %+v", u)
	}
}

// TestSlowSubscriberResyncsOthersUndelayed: a subscriber that never takes is
// held to Buffer events and then told to resync; the others get every event.
func TestSlowSubscriberResyncsOthersUndelayed(t *testing.T) {
	_, cli := newEtcd(t)
	tp := tenantPrefix(t)
	p := New(cli, Config{Buffer: 10})
	defer p.Close()
	slow, _ := p.Subscribe(Spec{Key: tp + "config/", Prefix: true})
	fast, _ := p.Subscribe(Spec{Key: tp + "config/", Prefix: true})
	next(t, fast, "the first resync")
	next(t, slow, "the first resync")
	var last int64
	var got []string
	for i := range 50 { // the fast one keeps up: it takes after each write
		last = put(t, cli, fmt.Sprintf("%sconfig/k%02d", tp, i), "v")
		got = append(got, collect(t, fast, last, "the fast subscriber's event")...)
	}
	if len(got) != 50 || slices.ContainsFunc(got, func(s string) bool { return s[0] == 'r' }) {
		t.Fatalf("fast subscriber got %d entries (resyncs: %v), want the 50 events", len(got), got[0])
	}
	slow.r.mu.Lock()
	queued, resync := len(slow.queue), slow.resync
	slow.r.mu.Unlock()
	if queued > 10 || resync == "" {
		t.Fatalf("slow subscriber holds %d events (buffer 10), resync %q", queued, resync)
	}
	u := next(t, slow, "the slow subscriber's resync")
	if !u.Resync || len(u.KVs) != 50 || u.Revision < last {
		t.Fatalf("slow subscriber: resync %v with %d keys at %d, want 50 keys at >= %d", u.Resync, len(u.KVs), u.Revision, last)
	}
}

// TestCompactionRelistsOncePerRoot: a watch resumed past a compaction re-lists
// the root once, whatever the number of subscribers, and each resyncs.
func TestCompactionRelistsOncePerRoot(t *testing.T) {
	e, writer := newEtcd(t)
	proxy := coordtest.NewProxy(t, e.Endpoints[0][len("http://"):])
	cli := coordtest.NewEtcdClient(t, proxy.URL())
	c := count(cli)
	tp := tenantPrefix(t)
	p := New(cli, Config{RequestTimeout: 500 * time.Millisecond})
	defer p.Close()
	var subs []*Sub
	for i := range 20 {
		s, _ := p.Subscribe(Spec{Key: fmt.Sprintf("%sconfig/k%d", tp, i%5), Backoff: coord.Backoff{Base: 10 * time.Millisecond, Cap: 100 * time.Millisecond}})
		subs = append(subs, s)
	}
	for _, s := range subs {
		next(t, s, "the first resync")
	}
	lists := c.gets.Load()
	proxy.Blackhole()
	var last int64
	for i := range 20 {
		last = put(t, writer, fmt.Sprintf("%sconfig/k%d", tp, i%5), fmt.Sprint(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if _, err := writer.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	cancel()
	proxy.Heal()
	for i, s := range subs {
		u := next(t, s, "a resync after the compaction")
		for !u.Resync {
			u = next(t, s, "a resync after the compaction")
		}
		if u.Revision < last || len(u.KVs) != 1 || string(u.KVs[0].Value) != fmt.Sprint(15+i%5) {
			t.Fatalf("subscriber %d resynced to %+v", i, u)
		}
	}
	// Every read after the fault: the re-list, and any probes (count-only).
	if relists := c.gets.Load() - lists; relists < 1 {
		t.Fatalf("no read after the compaction: the re-list did not happen")
	}
	if n := p.Stats().Relists; n != 1 {
		t.Fatalf("%d re-lists of the root for 20 subscribers, want 1", n)
	}
}

// TestPlaneEndsWithItsClient: the shared plane of a client closes when the
// client does, ending its subscriptions (goleak checks its goroutines).
func TestPlaneEndsWithItsClient(t *testing.T) {
	e := coordtest.Etcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := For(cli, nil)
	if For(cli, coord.SystemClock()) != p {
		t.Fatal("two shared planes for one client and clock")
	}
	fake := coordtest.NewFakeClock(time.Now())
	if For(cli, fake) == p {
		t.Fatal("a fake clock shares the system clock's plane")
	}
	s, _ := p.Subscribe(Spec{Key: "/tenants/t/config/x"})
	next(t, s, "the first resync")
	cli.Close()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription outlived its client by 10 s")
	}
	if !errors.Is(s.Err(), ErrClosed) {
		t.Fatalf("Err after the client closed: %v", s.Err())
	}
	cli2 := coordtest.NewEtcdClient(t, e.Endpoints...)
	if For(cli2, nil) == p {
		t.Fatal("a new client got the closed plane")
	}
}

// TestTenantWatchQuota: a tenant's roots count against its MaxWatches.
func TestTenantWatchQuota(t *testing.T) {
	_, cli := newEtcd(t)
	q := coord.NewQuotas(coord.QuotaConfig{Overrides: map[string]coord.Limits{"small": {MaxWatches: 2}}})
	p := New(cli, Config{Quotas: q})
	defer p.Close()
	for _, k := range []string{"config/a", "members/a", "config/b"} {
		if _, err := p.Subscribe(Spec{Key: "/tenants/small/" + k}); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
	_, err := p.Subscribe(Spec{Key: "/tenants/small/elections/a"})
	var qe *coord.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "watches" {
		t.Fatalf("a third root of a tenant limited to 2 watches: %v", err)
	}
}

// TestNewRootStartsAtItsFirstSubscribersRevision: a root created for a
// subscriber that starts from a past revision reads its first list at the
// revision before it, so the subscriber gets every event since — not a resync
// that would skip a change made and undone in between (a whole lease term
// between Observe's read and its subscription).
func TestNewRootStartsAtItsFirstSubscribersRevision(t *testing.T) {
	_, cli := newEtcd(t)
	tp := tenantPrefix(t)
	from := put(t, cli, tp+"elections/job/a", "")
	last := del(t, cli, tp+"elections/job/a")
	p := New(cli, Config{})
	defer p.Close()
	s, err := p.Subscribe(Spec{Key: tp + "elections/job/", Prefix: true, From: from})
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, s, last, "the events since the subscriber's revision")
	want := []string{"PUT " + tp + "elections/job/a=", "DELETE " + tp + "elections/job/a="}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q (no resync)", got, want)
	}
}
