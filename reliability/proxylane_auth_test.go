package reliability

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/coordkit/coordkit/failstatic"
	"github.com/coordkit/coordkit/membership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestGRPCProxyLaneTenantRBAC: etcd with auth enabled and a role per tenant
// prefix (the RBAC of docs/deploy-grpc-proxy.md), its clients logged in through
// the grpc-proxy: a tenant's failstatic cache and membership watcher work
// through the proxy — the plane's watches and probes pass the tenant's
// permissions — while a watch and a read of another tenant's prefix through
// the same proxy are denied.
func TestGRPCProxyLaneTenantRBAC(t *testing.T) {
	cluster := coordtest.EtcdCluster(t, 1, nil)
	gp := coordtest.GRPCProxy(t, cluster.Endpoints(), nil)
	enableTenantAuth(t, cluster.Endpoints(), "acme", "globex")
	acme := tenantLogin(t, []string{gp.URL}, "acme")
	globex := tenantLogin(t, []string{gp.URL}, "globex")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := globex.Put(ctx, "/tenants/globex/config/secret", "g"); err != nil {
		t.Fatalf("globex's own write through the proxy: %v", err)
	}
	if _, err := acme.Put(ctx, "/tenants/acme/config/flags", "a1"); err != nil {
		t.Fatalf("acme's own write through the proxy: %v", err)
	}

	c, err := failstatic.New(ctx, acme, failstatic.Config[string]{Key: "/tenants/acme/config/flags", Logger: laneQuiet,
		Decode: func(kvs []failstatic.KV) (string, error) {
			if len(kvs) == 0 {
				return "", nil
			}
			return string(kvs[0].Value), nil
		}})
	if err != nil {
		t.Fatalf("acme's cache through the proxy: %v", err)
	}
	defer c.Close()
	s, err := membership.NewSession(ctx, acme, membership.SessionConfig{Logger: laneQuiet})
	if err != nil {
		t.Fatalf("acme's membership session through the proxy: %v", err)
	}
	defer func() { _ = s.Close(context.Background()) }()
	if _, err := s.Register(ctx, membership.Config{Tenant: "acme", Service: "api", Instance: "i1", Addr: "10.0.0.1:80"}); err != nil {
		t.Fatalf("acme's registration through the proxy: %v", err)
	}
	w, err := membership.Watch(ctx, acme, "acme", "api", membership.WatchConfig{Logger: laneQuiet})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := acme.Put(ctx, "/tenants/acme/config/flags", "a2"); err != nil {
		t.Fatal(err)
	}
	coordtest.Until(t, 20*time.Second, 20*time.Millisecond, "acme's cache given its write and its watcher healthy with its instance", func() bool {
		_, found := w.View().Member("i1")
		return c.Get().Value == "a2" && c.Staleness() < 2*time.Second && found && w.Healthy() && w.Err() == nil
	})

	if _, err := acme.Get(ctx, "/tenants/globex/config/secret"); !denied(err) {
		t.Errorf("acme reading globex's key through the proxy: %v, want permission denied", err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	wr := <-acme.Watch(wctx, "/tenants/globex/", clientv3.WithPrefix())
	if err := wr.Err(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("acme watching globex's prefix through the proxy: %v, want permission denied", err)
	}
}
