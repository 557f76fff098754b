package reliability

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/coord/quotakv"
	"github.com/coordkit/coordkit/testing/coordtest"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// enableTenantAuth creates a root user and, per tenant, a role whose permission is
// read-write on /tenants/{tenant}/ only, then enables auth. It returns a client
// logged in as each tenant.
func enableTenantAuth(t *testing.T, endpoints []string, tenants ...string) map[string]*clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := coordtest.NewEtcdClient(t, endpoints...)
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.RoleAdd(ctx, "root"))
	must(admin.UserAdd(ctx, "root", "root-pw"))
	must(admin.UserGrantRole(ctx, "root", "root"))
	for _, tn := range tenants {
		prefix, err := coord.TenantPrefix(tn)
		if err != nil {
			t.Fatal(err)
		}
		must(admin.RoleAdd(ctx, "tenant-"+tn))
		must(admin.RoleGrantPermission(ctx, "tenant-"+tn, prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite)))
		must(admin.UserAdd(ctx, tn, tn+"-pw"))
		must(admin.UserGrantRole(ctx, tn, "tenant-"+tn))
	}
	must(admin.AuthEnable(ctx))
	clients := map[string]*clientv3.Client{}
	for _, tn := range tenants {
		clients[tn] = tenantLogin(t, endpoints, tn)
	}
	return clients
}

// tenantLogin returns a client logged in as tenant (after enableTenantAuth),
// dialled with opts.
func tenantLogin(t *testing.T, endpoints []string, tenant string, opts ...grpc.DialOption) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Username: tenant, Password: tenant + "-pw",
		DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// denied reports whether err carries etcd's permission-denied code (as an etcd
// error, or as the gRPC status a watch response carries).
func denied(err error) bool {
	return errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrGRPCPermissionDenied) ||
		status.Code(err) == codes.PermissionDenied
}

// TestTenantIsolation: with etcd auth and a role per tenant prefix, every
// cross-tenant read, write, watch and lease operation is denied, and the client-side
// quotas hold at 64 KiB + 1 and above 200 writes/s.
func TestTenantIsolation(t *testing.T) {
	res := coordtest.NewResult(t, "tenant isolation with etcd auth", coordtest.Faults("cross-tenant requests (permission denied seen)", "oversized value (quota error seen)", "writes over the rate (quota errors seen)"))
	defer coordtest.Report(t, res)

	srv := coordtest.Etcd(t)
	cl := enableTenantAuth(t, srv.Endpoints, "acme", "globex")
	acme, globex := cl["acme"], cl["globex"]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// globex owns a key attached to its own lease.
	gl, err := globex.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := globex.Put(ctx, "/tenants/globex/elections/x/1", "holder", clientv3.WithLease(gl.ID)); err != nil {
		t.Fatal(err)
	}
	// acme may use its own prefix.
	if _, err := acme.Put(ctx, "/tenants/acme/config/a", "v"); err != nil {
		t.Fatalf("own prefix: %v", err)
	}

	attempts := map[string]error{}
	_, attempts["read"] = acme.Get(ctx, "/tenants/globex/elections/x/1")
	_, attempts["range read"] = acme.Get(ctx, "/tenants/", clientv3.WithPrefix())
	_, attempts["write"] = acme.Put(ctx, "/tenants/globex/config/evil", "v")
	_, attempts["delete"] = acme.Delete(ctx, "/tenants/globex/elections/x/1")
	_, attempts["txn"] = acme.Txn(ctx).Then(clientv3.OpPut("/tenants/globex/config/evil", "v")).Commit()
	_, attempts["lease revoke"] = acme.Revoke(ctx, gl.ID)
	_, attempts["lease attach"] = acme.Put(ctx, "/tenants/acme/config/b", "v", clientv3.WithLease(gl.ID))
	_, attempts["lease ttl with keys"] = acme.TimeToLive(ctx, gl.ID, clientv3.WithAttachedKeys())
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	wr := <-acme.Watch(wctx, "/tenants/globex/", clientv3.WithPrefix())
	wcancel()
	attempts["watch"] = wr.Err()
	// The client hands a watch's error status over as plain text (an
	// errors.errorString): the code is only in the text.
	if err := wr.Err(); err != nil && strings.Contains(err.Error(), "code = "+codes.PermissionDenied.String()+" ") {
		attempts["watch"] = rpctypes.ErrPermissionDenied
	}

	res.Outcome["cross-tenant requests allowed"] = 0
	for op, err := range attempts {
		res.Trials++
		if denied(err) {
			res.Faults["cross-tenant requests (permission denied seen)"]++
			continue
		}
		res.Outcome["cross-tenant requests allowed"]++
		t.Errorf("cross-tenant %s was not denied: %v", op, err)
	}
	// globex's lease and key survived every attempt.
	if r, err := globex.Get(ctx, "/tenants/globex/elections/x/1"); err != nil || len(r.Kvs) != 1 {
		t.Fatalf("globex's key did not survive: %v", err)
	}

	// Quotas, on the client, before etcd. The quota's clock is frozen, so the rate
	// check is exact however slow the writes are: the burst (200) passes, the rest
	// are refused without reaching etcd.
	clock := coordtest.NewFakeClock(time.Unix(0, 0))
	kv := quotakv.New(acme, coord.NewQuotas(coord.QuotaConfig{Clock: clock}), quotakv.Config{})
	if _, err := kv.Put(ctx, "/tenants/acme/config/big", strings.Repeat("x", 64<<10)); err != nil {
		t.Fatalf("64 KiB: %v", err)
	}
	if _, err := kv.Put(ctx, "/tenants/acme/config/big", strings.Repeat("x", 64<<10+1)); !errors.Is(err, coord.ErrQuotaExceeded) {
		t.Fatalf("64 KiB + 1: %v", err)
	}
	res.Faults["oversized value (quota error seen)"]++
	var refused int64
	for i := 0; i < 400; i++ {
		if _, err := kv.Put(ctx, "/tenants/acme/config/rate", "v"); errors.Is(err, coord.ErrQuotaExceeded) {
			refused++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	// One token went to the 64 KiB write: 199 of the 400 pass.
	if refused != 201 {
		t.Fatalf("%d of 400 writes in one instant refused, want 201 (burst 200, one spent)", refused)
	}
	r, err := acme.Get(ctx, "/tenants/acme/config/rate")
	if err != nil || r.Kvs[0].Version != 199 {
		t.Fatalf("etcd saw %v writes, want 199 (%v)", r.Kvs[0].Version, err)
	}
	res.Faults["writes over the rate (quota errors seen)"] = int(refused)
	res.Outcome["writes accepted by etcd"] = r.Kvs[0].Version
}
