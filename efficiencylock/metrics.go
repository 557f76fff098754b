package efficiencylock

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Metric names and the lock's own attribute (docs/metrics.md).
const (
	metricAcquisitions    = "coordkit.efficiencylock.acquisitions"     // counter, attr outcome
	metricAttempts        = "coordkit.efficiencylock.attempts"         // histogram: SET NX attempts per acquisition
	metricRefreshFailures = "coordkit.efficiencylock.refresh_failures" // counter, attr reason
	metricLost            = "coordkit.efficiencylock.lost"             // counter, attr reason

	attrWhy = "coordkit.efficiencylock.reason" // the declared reason duplicates are harmless
)

// Outcomes of an acquisition (attribute coordkit.outcome on coordkit.efficiencylock.acquisitions).
const (
	outcomeAcquired    = "acquired"
	outcomeNotAcquired = "not_acquired"
	outcomeError       = "error"
)

// instruments are one Locker's metrics, with the attribute sets precomputed so the
// hot path allocates nothing for telemetry.
type instruments struct {
	acquisitions    metric.Int64Counter
	attempts        metric.Int64Histogram
	refreshFailures metric.Int64Counter
	lost            metric.Int64Counter

	base                            metric.MeasurementOption
	acquired, notAcquired, acqError metric.AddOption
}

func newInstruments(mp metric.MeterProvider, why Reason, tenant string) *instruments {
	m := mp.Meter(coord.InstrumentationName + "/efficiencylock")
	// The API's constructors return a usable no-op instrument alongside any error.
	acq, _ := m.Int64Counter(metricAcquisitions, metric.WithUnit("{call}"),
		metric.WithDescription("Lock acquisition calls by outcome (acquired, not_acquired, error)"))
	att, _ := m.Int64Histogram(metricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("SET NX attempts per acquisition call: contention"),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100))
	rf, _ := m.Int64Counter(metricRefreshFailures, metric.WithUnit("{refresh}"),
		metric.WithDescription("Refreshes that did not extend the lock, by reason"))
	lost, _ := m.Int64Counter(metricLost, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost before their holder released them, by reason"))
	base := []attribute.KeyValue{
		attribute.String(attrWhy, why.String()),
		attribute.String(coord.AttrTenant, tenant),
	}
	with := func(outcome string) metric.AddOption {
		return metric.WithAttributeSet(attribute.NewSet(append(base[:len(base):len(base)],
			attribute.String(coord.AttrOutcome, outcome))...))
	}
	return &instruments{
		acquisitions: acq, attempts: att, refreshFailures: rf, lost: lost,
		base:        metric.WithAttributeSet(attribute.NewSet(base...)),
		acquired:    with(outcomeAcquired),
		notAcquired: with(outcomeNotAcquired),
		acqError:    with(outcomeError),
	}
}

func (in *instruments) acquisition(ctx context.Context, outcome metric.AddOption, attempts int) {
	in.acquisitions.Add(ctx, 1, outcome)
	in.attempts.Record(ctx, int64(attempts), in.base)
}

func (in *instruments) reasonOpt(r LossReason) metric.AddOption {
	return metric.WithAttributes(attribute.String(coord.AttrReason, string(r)))
}

func (in *instruments) refreshFailed(ctx context.Context, r LossReason) {
	in.refreshFailures.Add(ctx, 1, in.base, in.reasonOpt(r))
}

func (in *instruments) lockLost(ctx context.Context, r LossReason) {
	in.lost.Add(ctx, 1, in.base, in.reasonOpt(r))
}
