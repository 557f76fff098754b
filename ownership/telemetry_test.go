package ownership_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/ownership"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// TestMetrics: the owned and unowned gauges per member, the moves counter by
// reason, the handoff histogram and the target writes counter report what
// happened through a join and a Close.
func TestMetrics(t *testing.T) {
	const p = 6
	rd := newReader(t)
	reader := rd.r
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, MeterProvider: rd.mp})
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	of := func(n *node) attribute.KeyValue { return attribute.String("coordkit.ownership.member", n.m.ID()) }
	if got := collect(t, reader, "coordkit.ownership.owned", of(a)); got != p {
		t.Errorf("owned = %d, want %d", got, p)
	}
	if got := collect(t, reader, "coordkit.ownership.unowned"); got != 0 {
		t.Errorf("unowned = %d, want 0", got)
	}
	if got := collect(t, reader, "coordkit.ownership.target_writes"); got != 1 {
		t.Errorf("target writes = %d, want 1", got)
	}
	b := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p / 2, b: p / 2})
	if got := collect(t, reader, "coordkit.ownership.moves", of(a), attribute.String(coord.AttrReason, string(ownership.ReasonRebalance))); got != p/2 {
		t.Errorf("moves(rebalance) of the old owner = %d, want %d", got, p/2)
	}
	if got := collect(t, reader, "coordkit.ownership.handoff.duration"); got != p+p/2 {
		t.Errorf("handoff histogram count = %d, want %d (every acquisition)", got, p+p/2)
	}
	if err := b.m.Close(); err != nil {
		t.Fatal(err)
	}
	waitOwned(t, p, 10*time.Second, map[*node]int{a: p})
	if got := collect(t, reader, "coordkit.ownership.moves", of(b), attribute.String(coord.AttrReason, string(ownership.ReasonClosed))); got != p/2 {
		t.Errorf("moves(closed) = %d, want %d", got, p/2)
	}
	if got := collect(t, reader, "coordkit.ownership.owned", of(b)); got != 0 {
		t.Errorf("a closed member still reports %d owned", got)
	}
}

// collect sums the int64 data points (or counts the histogram observations) of
// the metric name whose attributes include match.
func collect(t testing.TB, r *sdkmetric.ManualReader, name string, match ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	matches := func(s attribute.Set) bool {
		for _, kv := range match {
			if v, ok := s.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var total int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if matches(dp.Attributes) {
						total += dp.Value
					}
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					if matches(dp.Attributes) {
						total += dp.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					if matches(dp.Attributes) {
						total += int64(dp.Count)
					}
				}
			}
		}
	}
	return total
}

// TestWritesPacedByTheTenantQuota: a member given more partitions than its
// tenant's write burst acquires them all, paced at the quota's rate (RFC MUST 7:
// before, a member wrote 2,800–3,400 keys/s for one tenant), and the waits are
// counted in coordkit.ownership.quota_delayed.
func TestWritesPacedByTheTenantQuota(t *testing.T) {
	const p = 60
	rd := newReader(t)
	q := coord.NewQuotas(coord.QuotaConfig{Overrides: map[string]coord.Limits{coordtest.Tenant(t): {WritesPerSecond: 40, Burst: 20}}})
	g, cli, tenant := newGroup(t, ownership.Config{Partitions: p, Quotas: q, MeterProvider: rd.mp})
	start := time.Now()
	a := join(t, g, cli, tenant, 0)
	waitOwned(t, p, 20*time.Second, map[*node]int{a: p})
	took := time.Since(start)
	waits := collect(t, rd.r, "coordkit.ownership.quota_delayed")
	t.Logf("%d partitions (and a target write) at 40 writes/s, burst 20: all held after %v, %d writes delayed by the quota", p, took.Round(time.Millisecond), waits)
	if waits == 0 {
		t.Fatalf("%d writes against a burst of 20 never waited for the quota", p+1)
	}
	// The burst's 20 writes do not wait: at most the other 41 count, and (all
	// asked for at once) most of them do.
	if waits > p+1-20 || waits <= (p+1)/2 {
		t.Fatalf("%d writes counted as delayed; of %d writes against a burst of 20, want at most %d and most of them", waits, p+1, p+1-20)
	}
	if min := time.Duration(p+1-20) * time.Second / 40; took < min*3/4 {
		t.Fatalf("%d writes at 40/s after a burst of 20 took %v, less than the quota allows (%v)", p+1, took, min)
	}
}
