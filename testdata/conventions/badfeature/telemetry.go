package badfeature

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const metricLatency = "coordkit.badfeature.latency_ms"

// newTelemetry creates instruments outside metrics.go, names one by a literal,
// spells a unit in a name and uses milliseconds.
func newTelemetry(mp metric.MeterProvider) {
	m := mp.Meter("badfeature")
	_, _ = m.Int64Counter("badfeature.requests_total", metric.WithUnit("{request}"))
	_, _ = m.Float64Histogram(metricLatency, metric.WithUnit("ms"))
	_ = attribute.String("badfeature.tenant", "acme")
}
