package failstatic

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Metric names and the package's own attribute (docs/metrics.md).
const (
	metricStaleness = "coordkit.failstatic.staleness"            // gauge: since last confirmed current
	metricRejected  = "coordkit.failstatic.rejected_snapshots"   // counter
	metricRelists   = "coordkit.failstatic.relists"              // counter: resyncs after the first
	metricCoalesced = "coordkit.failstatic.subscriber_coalesced" // counter: snapshots merged for a slow subscriber
	attrWatched     = "coordkit.failstatic.watched"              // the key or prefix
)

type telemetry struct {
	attrs     metric.MeasurementOption
	rejected  metric.Int64Counter
	coalesced metric.Int64Counter
	relists   metric.Int64Counter
	reg       metric.Registration
}

func newTelemetry[T any](c *Cache[T]) (*telemetry, error) {
	m := c.cfg.MeterProvider.Meter(coord.InstrumentationName + "/failstatic")
	kv := []attribute.KeyValue{attribute.String(attrWatched, c.watched)}
	if tenant, ok := coord.TenantOf(c.watched); ok {
		kv = append(kv, attribute.String(coord.AttrTenant, tenant))
	}
	t := &telemetry{attrs: metric.WithAttributes(kv...)}
	var err error
	if t.rejected, err = m.Int64Counter(metricRejected, metric.WithUnit("{snapshot}"),
		metric.WithDescription("snapshots rejected by Decode or Validate")); err != nil {
		return nil, err
	}
	if t.coalesced, err = m.Int64Counter(metricCoalesced, metric.WithUnit("{snapshot}"),
		metric.WithDescription("snapshots merged into a later update for a subscriber slower than the updates")); err != nil {
		return nil, err
	}
	if t.relists, err = m.Int64Counter(metricRelists, metric.WithUnit("{read}"),
		metric.WithDescription("resyncs of the cache after the first (a compaction, or the cache fell behind)")); err != nil {
		return nil, err
	}
	gauge, err := m.Float64ObservableGauge(metricStaleness, metric.WithUnit("s"),
		metric.WithDescription("time since the cache was last confirmed current"))
	if err != nil {
		return nil, err
	}
	obs := metric.WithAttributes(kv...)
	t.reg, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(gauge, c.Staleness().Seconds(), obs)
		return nil
	}, gauge)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *telemetry) close() {
	if t != nil && t.reg != nil {
		_ = t.reg.Unregister()
	}
}
