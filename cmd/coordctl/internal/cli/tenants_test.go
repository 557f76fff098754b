package cli_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/coordkit/coordkit/cmd/coordctl/internal/admin"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/cli"
	"github.com/coordkit/coordkit/cmd/coordctl/internal/testenv"
)

// TestTenantsAgainstTheQuotas (issue 29, point 7): `coordctl tenants` shows each
// tenant's keys, bytes, largest value and leases (measured), its write rate (a
// lower bound, estimated from two reads) and its watches (from coordkit's own
// gauges in Prometheus: etcd counts watches only cluster-wide), against the
// RFC's quotas, with etcd's health beside it; without Prometheus the watches
// are unknown, never 0; with the members' metrics unreachable it exits 5.
func TestTenantsAgainstTheQuotas(t *testing.T) {
	e := testenv.Seeded(t)
	ctx := testenv.Ctx(t)
	if _, err := e.Cli.Put(ctx, "/tenants/bigco/config/catalog", strings.Repeat("x", 70<<10)); err != nil {
		t.Fatal(err)
	}
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("query") != admin.WatchesQuery {
			http.Error(w, `{"status":"error","error":"unexpected query"}`, http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"coordkit_tenant":"acme"},"value":[1,"3"]}]}}`))
	}))
	defer prom.Close()
	r := newRunner(t, e)
	r.env["COORDCTL_PROMETHEUS"] = prom.URL

	// Writes under acme while the command samples.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.Cli.Put(context.Background(), "/tenants/acme/config/hot-"+itoa(int64(i%20)), "v"); err != nil {
				return
			}
		}
	})
	var tv admin.Tenants
	r.decode(&tv, "tenants", "--sample", "500ms")
	close(stop)
	wg.Wait()
	by := map[string]admin.TenantUsage{}
	for _, u := range tv.Tenants {
		by[u.Tenant] = u
	}
	acme, big := by["acme"], by["bigco"]
	if acme.Keys == 0 || acme.Bytes == 0 || acme.Leases == 0 || acme.Watches == nil || *acme.Watches != 3 || acme.WritesPerSecond == nil || *acme.WritesPerSecond <= 0 {
		t.Fatalf("acme = %+v: want keys, bytes, leases, 3 watches (Prometheus) and a write rate", acme)
	}
	if big.LargestValue != 70<<10 || len(big.Over) != 1 || big.Over[0] != "value_bytes" || big.Watches == nil || *big.Watches != 0 {
		t.Fatalf("bigco = %+v: want its 70 KiB value over the 64 KiB quota, 0 watches reported", big)
	}
	h := tv.Etcd
	if h.Leader == nil || !*h.Leader || h.QuotaBytes == nil || *h.QuotaBytes <= 0 || h.DBPercentQuota == nil || h.WALFsyncP99 == nil ||
		h.Watchers == nil || h.WritesPerSecond == nil || *h.WritesPerSecond <= 0 || len(h.Endpoints) != 1 || tv.Errors != nil {
		t.Fatalf("etcd health = %+v, errors %v", h, tv.Errors)
	}
	out, _, code := r.run("tenants", "--sample", "0")
	if code != cli.ExitOK || !strings.Contains(out, "TENANTS (quotas: 52428800 bytes, 65536 bytes per value, 200 writes/s, 32 watches)") || !strings.Contains(out, "value_bytes") {
		t.Fatalf("tenants (table): exit %d\n%s", code, out)
	}

	// No Prometheus: watches unknown, not 0; members' metrics unreachable: exit 5.
	delete(r.env, "COORDCTL_PROMETHEUS")
	r.decode(&tv, "tenants", "--sample", "0")
	for _, u := range tv.Tenants {
		if u.Watches != nil || u.WritesPerSecond != nil {
			t.Fatalf("%s without Prometheus and without a sample: watches %v, writes %v: want unknown (null)", u.Tenant, u.Watches, u.WritesPerSecond)
		}
	}
	r.env["COORDCTL_ETCD_METRICS"] = "http://" + closedAddr(t) + "/metrics"
	out, errs, code := r.run("tenants", "--sample", "0")
	if code != cli.ExitBlind || !strings.Contains(errs, "etcd metrics") || !strings.Contains(out, "DB size of quota:") || !strings.Contains(strings.Join(strings.Fields(out), " "), "DB size of quota: unknown") {
		t.Fatalf("tenants with the metrics unreachable: exit %d\n%s%s", code, out, errs)
	}
}
