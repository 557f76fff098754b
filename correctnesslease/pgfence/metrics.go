package pgfence

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// metricRejected is the fence's one metric (docs/metrics.md): stale tokens
// rejected, attr coordkit.lease.
const metricRejected = "coordkit.pgfence.rejected"

// newRejected creates the rejection counter from cfg.MeterProvider.
func newRejected(cfg Config) (metric.Int64Counter, error) {
	rejected, err := cfg.MeterProvider.Meter(coord.InstrumentationName+"/correctnesslease/pgfence").
		Int64Counter(metricRejected,
			metric.WithDescription("Writes rejected because their fencing token was older than the newest accepted."),
			metric.WithUnit("{write}"))
	if err != nil {
		return nil, fmt.Errorf("pgfence: counter %s: %w", metricRejected, err)
	}
	return rejected, nil
}
