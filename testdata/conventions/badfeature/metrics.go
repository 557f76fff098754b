package badfeature

import "go.opentelemetry.io/otel/metric"

const (
	metricWait  = "coordkit.badfeature.wait"
	metricWaits = "coord.badfeature.waits"
)

// newMetrics: a histogram of seconds without buckets, a name under the old prefix.
func newMetrics(m metric.Meter) {
	_, _ = m.Float64Histogram(metricWait, metric.WithUnit("s"))
	_, _ = m.Int64Counter(metricWaits, metric.WithUnit("{wait}"))
}
