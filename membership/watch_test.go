package membership_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordkit/coord"
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
	cli := coordtest.Etcd(t).Client(t)
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
	cli := coordtest.Etcd(t).Client(t)
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
	cli := coordtest.Etcd(t).Client(t)
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
	cli := coordtest.Etcd(t).Client(t)
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

// TestListAndServices: the one-shot reads return what a Watcher sees (the same
// members with their lease and revisions, malformed keys apart), group a
// tenant's keys by service (skipping correctnesslease's session keys directly
// under members/), and read every tenant at one revision.
func TestListAndServices(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := register(t, cli, membership.Config{Tenant: "acme", Service: "api", Instance: "a", Addr: "10.0.0.1:80", Metadata: map[string]string{"zone": "x"}})
	register(t, cli, membership.Config{Tenant: "acme", Service: "api", Instance: "b"})
	register(t, cli, membership.Config{Tenant: "acme", Service: "api-v2", Instance: "c", Addr: "10.0.0.3:80"})
	register(t, cli, membership.Config{Tenant: "acme-eu", Service: "api", Instance: "d"})
	for k, v := range map[string]string{
		"/tenants/acme/members/session-694d8f3a": "host pid 1", // correctnesslease's
		"/tenants/acme/members/api/bad":          "not json",
		"/tenants/acme/members/api/x/deeper":     "{}",
		"/tenants/acme/elections/leader/1":       "",
	} {
		if _, err := cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}

	v, err := membership.ServiceGet(ctx, cli, "acme", "api")
	if err != nil {
		t.Fatal(err)
	}
	w := watch(t, cli, "acme", "api", nil)
	wv := nextView(t, w, "the watcher's view of all four keys", func(v membership.View) bool { return len(v.Members)+len(v.Malformed) == 4 })
	if !slices.Equal(names(v), []string{"a", "b"}) || !slices.Equal(v.Malformed, []string{"/tenants/acme/members/api/bad", "/tenants/acme/members/api/x/deeper"}) ||
		v.Tenant != "acme" || v.Service != "api" || v.Revision < wv.Revision {
		t.Fatalf("List = %+v", v)
	}
	ma, _ := v.Member("a")
	st := a.Status()
	if wa, _ := wv.Member("a"); ma.Addr != "10.0.0.1:80" || ma.Metadata["zone"] != "x" || ma.Lease != st.Lease || ma.CreateRevision != st.CreateRevision ||
		ma.ModRevision != wa.ModRevision || !slices.Equal(v.Malformed, wv.Malformed) {
		t.Fatalf("List member %+v, registration %+v, watcher's %+v", ma, st, wa)
	}

	if empty, err := membership.ServiceGet(ctx, cli, "acme", "nobody"); !errors.Is(err, membership.ErrNotFound) || len(empty.Members) != 0 {
		t.Fatalf("ServiceGet of a service without members = %+v, %v; want ErrNotFound", empty, err)
	}

	service := func(vs []membership.View) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Tenant+"/"+v.Service+":"+slices.Concat(names(v), v.Malformed)[0])
		}
		return out
	}
	vs, err := membership.ServiceList(ctx, cli, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got := service(vs); !slices.Equal(got, []string{"acme/api:a", "acme/api-v2:c"}) || len(vs[0].Members) != 2 || len(vs[0].Malformed) != 2 {
		t.Fatalf("Services(acme) = %v (%+v)", got, vs)
	}
	all, err := membership.ServiceList(ctx, cli, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := service(all); !slices.Equal(got, []string{"acme/api:a", "acme/api-v2:c", "acme-eu/api:d"}) || all[0].Revision != all[2].Revision {
		t.Fatalf("Services(\"\") = %v (%+v)", got, all)
	}

	for _, c := range []struct {
		name string
		err  error
	}{
		{"list bad tenant", func() error { _, err := membership.ServiceGet(ctx, cli, "a/b", "api"); return err }()},
		{"list bad service", func() error { _, err := membership.ServiceGet(ctx, cli, "acme", "bad\x00"); return err }()},
		{"services bad tenant", func() error { _, err := membership.ServiceList(ctx, cli, "no space"); return err }()},
	} {
		if !errors.Is(c.err, membership.ErrInvalidConfig) || !errors.Is(c.err, coord.ErrInvalidName) {
			t.Errorf("%s: %v, want ErrInvalidConfig and coord.ErrInvalidName", c.name, c.err)
		}
	}
	if _, err := membership.ServiceGet(ctx, nil, "acme", "api"); !errors.Is(err, membership.ErrInvalidConfig) {
		t.Errorf("List with a nil client: %v", err)
	}
}
