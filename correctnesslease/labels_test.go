package correctnesslease

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// leaseLabels returns, per metric name, the sum of its data points by the value
// of their coordkit.lease attribute.
func leaseLabels(t *testing.T, r *sdkmetric.ManualReader) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, p := range metricPoints(t, r) {
		v, ok := p.attrs.Value(attribute.Key(coord.AttrLease))
		if !ok {
			continue
		}
		if out[p.name] == nil {
			out[p.name] = map[string]int64{}
		}
		out[p.name][v.AsString()] += p.n
	}
	return out
}

// TestLeaseLabelCardinalityIsBounded: every distinct lease name would be a new
// coordkit.lease label value, an unbounded time series count for a caller that
// derives names from data. Past DefaultMaxLeaseLabels distinct names the metrics
// report "other"; nothing is lost from the counts.
func TestLeaseLabelCardinalityIsBounded(t *testing.T) {
	cli := coordtest.Etcd(t).Client(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	s := newSession(t, cli, Config{Tenant: coordtest.Tenant(t), TTL: testTTL, MeterProvider: mp})
	const names = 110
	for i := range names {
		l, err := Acquire(ctx, s, fmt.Sprintf("n-%03d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for metric, byLease := range leaseLabels(t, reader) {
		var total int64
		for _, n := range byLease {
			total += n
		}
		t.Logf("%s: %d label values, total %d, other %d", metric, len(byLease), total, byLease["other"])
		if len(byLease) > 101 {
			t.Errorf("%s has %d coordkit.lease values for %d names, want at most 100 and \"other\"", metric, len(byLease), names)
		}
		if metric == "coordkit.correctnesslease.acquisitions" && (total != names || byLease["other"] != names-100) {
			t.Errorf("%s: total %d (other %d), want %d (other %d)", metric, total, byLease["other"], names, names-100)
		}
	}
}
