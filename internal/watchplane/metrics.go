package watchplane

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Metric names of the watch plane.
const (
	MetricUpstream      = "coordkit.watchplane.upstream"      // gauge: upstream etcd watches open, attrs tenant+kind
	MetricSubscriptions = "coordkit.watchplane.subscriptions" // gauge: subscriptions served, attrs tenant+kind
	MetricOpens         = "coordkit.watchplane.opens"         // counter: upstream watch opens, attr reason (first, resume, hung, compacted)
	MetricRelists       = "coordkit.watchplane.relists"       // counter: root re-lists (first list excluded)
	MetricResyncs       = "coordkit.watchplane.resyncs"       // counter: subscriber resyncs, attr reason (overflow, history, relist)
	MetricThrottled     = "coordkit.watchplane.throttled"     // counter: opens and re-lists delayed by the tenant's reconnect budget
	AttrKind            = "coordkit.watchplane.kind"
	AttrReason          = coord.AttrReason
)

type instruments struct {
	opens, relists, resyncs, throttled metric.Int64Counter
	gauges                             metric.Registration
}

// newInstruments creates the plane's instruments; observe reports the gauges.
// The API never fails to construct an instrument (a no-op one comes back on
// error), so errors are ignored.
func newInstruments(mp metric.MeterProvider, observe func(metric.Observer, metric.Int64ObservableGauge, metric.Int64ObservableGauge)) *instruments {
	m := mp.Meter(coord.InstrumentationName + "/internal/watchplane")
	in := &instruments{}
	in.opens, _ = m.Int64Counter(MetricOpens, metric.WithUnit("{open}"), metric.WithDescription("Upstream etcd watch opens, by reason"))
	in.relists, _ = m.Int64Counter(MetricRelists, metric.WithUnit("{relist}"), metric.WithDescription("Re-lists of a root after a compaction or a lost history"))
	in.resyncs, _ = m.Int64Counter(MetricResyncs, metric.WithUnit("{resync}"), metric.WithDescription("Subscribers told to resync from the mirror, by reason"))
	in.throttled, _ = m.Int64Counter(MetricThrottled, metric.WithUnit("{delay}"), metric.WithDescription("Watch opens and re-lists delayed by the tenant's reconnect budget"))
	up, _ := m.Int64ObservableGauge(MetricUpstream, metric.WithUnit("{watch}"), metric.WithDescription("Upstream etcd watches open"))
	subs, _ := m.Int64ObservableGauge(MetricSubscriptions, metric.WithUnit("{subscription}"), metric.WithDescription("Subscriptions served by the plane"))
	in.gauges, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		observe(o, up, subs)
		return nil
	}, up, subs)
	return in
}

func (in *instruments) close() {
	if in.gauges != nil {
		_ = in.gauges.Unregister()
	}
}

// rootAttrs labels a root: its tenant and kind, or "" and "other" outside the
// tenant layout (a raw prefix would be an unbounded label).
func rootAttrs(prefix string) attribute.Set {
	tenant, ok := coord.TenantOf(prefix)
	kind := "other"
	if ok {
		rest := strings.TrimPrefix(prefix, "/tenants/"+tenant+"/")
		if k, _, found := strings.Cut(rest, "/"); found && k != "" {
			kind = k
		}
	}
	return attribute.NewSet(attribute.String(coord.AttrTenant, tenant), attribute.String(AttrKind, kind))
}

func withReason(set attribute.Set, reason string) metric.MeasurementOption {
	kvs := append(set.ToSlice(), attribute.String(AttrReason, reason))
	return metric.WithAttributes(kvs...)
}
