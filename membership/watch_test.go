package membership_test

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// names returns the instance names of a view.
func names(v membership.View) []string {
	out := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		out = append(out, m.Instance)
	}
	return out
}

// nextView waits for a view on w.Updates satisfying cond.
func nextView(t testing.TB, w *membership.Watcher, what string, cond func(membership.View) bool) membership.View {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case v, ok := <-w.Updates():
			if !ok {
				t.Fatalf("%s: updates closed: %v", what, w.Err())
			}
			if cond(v) {
				return v
			}
		case <-deadline:
			t.Fatalf("%s: no such view within 10 s; last %v at %d", what, names(w.View()), w.View().Revision)
		}
	}
}

func TestWatchDeliversWholeViews(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	a := register(t, cli, membership.Config{Tenant: tenant, Service: "api", Instance: "a", Addr: "10.0.0.1:80", Metadata: map[string]string{"zone": "x"}})
	m := newMetrics(t)
	w := watch(t, cli, tenant, "api", &membership.WatchConfig{MeterProvider: m})
	v := nextView(t, w, "first view", func(v membership.View) bool { return v.Revision > 0 })
	if !slices.Equal(names(v), []string{"a"}) || v.Tenant != tenant || v.Service != "api" {
		t.Fatalf("first view %+v", v)
	}
	ma, _ := v.Member("a")
	st := a.Status()
	if ma.Addr != "10.0.0.1:80" || ma.Metadata["zone"] != "x" || ma.Lease != st.Lease || ma.CreateRevision != st.CreateRevision || ma.ModRevision != st.ModRevision {
		t.Fatalf("member %+v, registration %+v", ma, st)
	}
	b := register(t, cli, membership.Config{Tenant: tenant, Service: "api", Instance: "b"})
	register(t, cli, membership.Config{Tenant: tenant, Service: "other", Instance: "c"})
	v2 := nextView(t, w, "b joins", func(v membership.View) bool { return len(v.Members) == 2 })
	if !slices.Equal(names(v2), []string{"a", "b"}) || v2.Revision <= v.Revision {
		t.Fatalf("view after b: %v at %d", names(v2), v2.Revision)
	}
	if err := a.Update(context.Background(), map[string]string{"zone": "y"}); err != nil {
		t.Fatal(err)
	}
	nextView(t, w, "a's metadata", func(v membership.View) bool { m, _ := v.Member("a"); return m.Metadata["zone"] == "y" })
	if err := b.Deregister(context.Background()); err != nil {
		t.Fatal(err)
	}
	v3 := nextView(t, w, "b leaves", func(v membership.View) bool { return len(v.Members) == 1 })
	if !slices.Equal(names(v3), []string{"a"}) {
		t.Fatalf("view after b left: %v", names(v3))
	}
	// A key under the prefix that is not a member record is reported, not
	// dropped silently, and not a member.
	if _, err := cli.Put(context.Background(), "/tenants/"+tenant+"/members/api/junk", "not json"); err != nil {
		t.Fatal(err)
	}
	v4 := nextView(t, w, "malformed key", func(v membership.View) bool { return len(v.Malformed) == 1 })
	if len(v4.Members) != 1 || v4.Malformed[0] != "/tenants/"+tenant+"/members/api/junk" {
		t.Fatalf("view with junk: %+v", v4)
	}
	coordtest.Until(t, 5*time.Second, 5*time.Millisecond, "healthy", w.Healthy)
	if got := m.sum("coordkit.membership.members", attribute.String("coordkit.membership.service", "api")); got != 1 {
		t.Fatalf("members gauge = %d", got)
	}
	rv, err := w.Refresh(context.Background())
	if err != nil || rv.Revision < v4.Revision || len(rv.Members) != 1 {
		t.Fatalf("Refresh: %+v %v", rv, err)
	}
	w.Close()
	closed := make(chan bool, 1)
	go func() {
		_, ok := <-w.Updates()
		if ok { // a view may be pending; the channel must close after it
			_, ok = <-w.Updates()
		}
		closed <- !ok
	}()
	if !coordtest.Recv(t, closed, 10*time.Second, "Updates closed after Close") {
		t.Fatal("Updates not closed after Close")
	}
	if w.Healthy() || w.Err() == nil {
		t.Fatalf("after Close: healthy %v err %v", w.Healthy(), w.Err())
	}
}

func TestWatchRejectsBadNames(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	for _, tc := range [][2]string{{"", "api"}, {"t", "a/b"}, {"t", "\xff"}, {"t\x00", "api"}} {
		if _, err := membership.Watch(context.Background(), cli, tc[0], tc[1], membership.WatchConfig{}); err == nil {
			t.Errorf("Watch(%q, %q) accepted", tc[0], tc[1])
		}
	}
}

// TestWatchAppliesEveryEventOfOneRevision: one request that deletes the whole
// prefix produces several events at a single revision; every one of them must
// leave the view (not only the first).
func TestWatchAppliesEveryEventOfOneRevision(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	prefix := "/tenants/" + tenant + "/members/api/"
	for _, i := range []string{"a", "b", "c"} {
		if _, err := cli.Put(context.Background(), prefix+i, `{"addr":"10.0.0.1:80"}`); err != nil {
			t.Fatal(err)
		}
	}
	w := watch(t, cli, tenant, "api", nil)
	nextView(t, w, "three members", func(v membership.View) bool { return len(v.Members) == 3 })
	dr, err := cli.Delete(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil || dr.Deleted != 3 {
		t.Fatalf("delete prefix: %v %v", dr, err)
	}
	v := nextView(t, w, "empty view", func(v membership.View) bool { return v.Revision >= dr.Header.Revision })
	if len(v.Members) != 0 {
		t.Fatalf("after one delete of the prefix the view still holds %v", names(v))
	}
}

// TestNamesRegisterRefusesAreMalformed: keys written by anything but the SDK
// whose instance segment Register would refuse (a NUL, invalid UTF-8,
// whitespace) are not members — neither in a Watcher's view nor in List — so
// the resolver never dials them; they are listed as Malformed. Before, only
// undecodable values and deeper paths went to Malformed.
func TestNamesRegisterRefusesAreMalformed(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
	tenant := coordtest.Tenant(t)
	prefix := "/tenants/" + tenant + "/members/api/"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := `{"addr":"10.0.0.1:80"}`
	bad := []string{"nul\x00x", "cut\xe2\x82", "\xff", "sp ace"}
	for _, inst := range append([]string{"ok"}, bad...) {
		if _, err := cli.Put(ctx, prefix+inst, good); err != nil {
			t.Fatal(err)
		}
	}
	w := watch(t, cli, tenant, "api", nil)
	v := nextView(t, w, "the first view", func(v membership.View) bool { return v.Revision > 0 })
	l, err := membership.List(ctx, cli, tenant, "api")
	if err != nil {
		t.Fatal(err)
	}
	for name, view := range map[string]membership.View{"watcher": v, "List": l} {
		if !slices.Equal(names(view), []string{"ok"}) || len(view.Malformed) != len(bad) {
			t.Errorf("%s: members %q, malformed %q; want only \"ok\" as a member and %d malformed", name, names(view), view.Malformed, len(bad))
		}
	}
}
