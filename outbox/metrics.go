package outbox

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/coordkit/coordkit/coord"
	"go.opentelemetry.io/otel/metric"
)

type metrics struct {
	lag       metric.Float64Histogram
	published metric.Int64Counter
	retries   metric.Int64Counter
	parked    metric.Int64Counter
	rejected  metric.Int64Counter
	dups      metric.Int64Counter
	oldest    atomic.Uint64 // float64 bits, seconds; written by relays
}

// newMetrics creates the instruments; gauge registers the oldest-unpublished
// gauge (relays' side only: an Inbox must not report a zero age).
func newMetrics(mp metric.MeterProvider, gauge bool) (*metrics, error) {
	mt := mp.Meter(coord.InstrumentationName + "/outbox")
	m := &metrics{}
	var err error
	if m.lag, err = mt.Float64Histogram(coord.MetricOutboxPublishLag, metric.WithUnit("ms"),
		metric.WithDescription("time from enqueue (created_at) to publication"),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000)); err != nil {
		return nil, err
	}
	if m.published, err = mt.Int64Counter(coord.MetricOutboxPublished, metric.WithDescription("events published and marked")); err != nil {
		return nil, err
	}
	if m.retries, err = mt.Int64Counter(coord.MetricOutboxRetries, metric.WithDescription("failed publish attempts scheduled for retry")); err != nil {
		return nil, err
	}
	if m.parked, err = mt.Int64Counter(coord.MetricOutboxParked, metric.WithDescription("events moved to the dead-letter table")); err != nil {
		return nil, err
	}
	if m.rejected, err = mt.Int64Counter(coord.MetricOutboxEnqueueError, metric.WithDescription("events rejected by write-time validation")); err != nil {
		return nil, err
	}
	if m.dups, err = mt.Int64Counter(coord.MetricInboxDuplicates, metric.WithDescription("inbox deliveries skipped as duplicates")); err != nil {
		return nil, err
	}
	if !gauge {
		return m, nil
	}
	if _, err = mt.Float64ObservableGauge(coord.MetricOutboxOldestAge, metric.WithUnit("s"),
		metric.WithDescription("age of the oldest unpublished event, as last seen by a relay"),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(math.Float64frombits(m.oldest.Load()))
			return nil
		})); err != nil {
		return nil, err
	}
	return m, nil
}
