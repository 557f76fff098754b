package quotakv

import (
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// metricRejected counts the writes a quota refused (docs/metrics.md), attrs
// coordkit.tenant and coordkit.quota.
const metricRejected = "coordkit.quotakv.rejected"

// newRejected creates the refusal counter from cfg.MeterProvider.
func newRejected(cfg Config) metric.Int64Counter {
	// The API's counters never fail to construct; a nil-safe no-op is returned on error.
	rejected, _ := cfg.MeterProvider.Meter(coord.InstrumentationName+"/coord/quotakv").Int64Counter(metricRejected,
		metric.WithDescription("Writes refused by a client-side quota before reaching etcd"), metric.WithUnit("{write}"))
	return rejected
}
