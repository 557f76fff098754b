package failstatic_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestMetrics checks that the staleness gauge and the rejection counter are
// exported under the names in coord/telemetry.go, with the tenant attribute.
func TestMetrics(t *testing.T) {
	_, cli, prefix := etcdPrefix(t)
	put(t, cli, prefix+"a", "1")
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	cfg := baseConfig(prefix)
	cfg.MeterProvider = provider
	c := mustNew(t, cli, cfg)
	put(t, cli, prefix+"a", "INVALID")
	coordtest.Until(t, 10*time.Second, 5*time.Millisecond, "rejection", func() bool { return c.Status().Rejected == 1 })

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[float64]:
				if m.Name == "coordkit.failstatic.staleness" && len(d.DataPoints) == 1 {
					dp := d.DataPoints[0]
					tenant, ok := dp.Attributes.Value(coord.AttrTenant)
					if !ok || tenant.AsString() == "" || dp.Value < 0 || dp.Value > 5 {
						t.Fatalf("staleness point %+v", dp)
					}
					found[m.Name] = true
				}
			case metricdata.Sum[int64]:
				if m.Name == "coordkit.failstatic.rejected_snapshots" && len(d.DataPoints) == 1 && d.DataPoints[0].Value == 1 {
					found[m.Name] = true
				}
			}
		}
	}
	for _, name := range []string{"coordkit.failstatic.staleness", "coordkit.failstatic.rejected_snapshots"} {
		if !found[name] {
			t.Errorf("metric %s missing or wrong: %+v", name, rm.ScopeMetrics)
		}
	}
}
