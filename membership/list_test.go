package membership_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestListAndServices: the one-shot reads return what a Watcher sees (the same
// members with their lease and revisions, malformed keys apart), group a
// tenant's keys by service (skipping correctnesslease's session keys directly
// under members/), and read every tenant at one revision.
func TestListAndServices(t *testing.T) {
	e := coordtest.Etcd(t)
	cli := e.Client(t)
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
