package outbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Metric names and the package's own attributes (docs/metrics.md).
const (
	metricPublishLag       = "coordkit.outbox.publish.lag"            // histogram: created → published
	metricOldestAge        = "coordkit.outbox.oldest_unpublished.age" // gauge
	metricPublished        = "coordkit.outbox.published"              // counter
	metricRetries          = "coordkit.outbox.retries"                // counter
	metricParked           = "coordkit.outbox.parked"                 // counter
	metricEnqueueRejected  = "coordkit.outbox.enqueue.rejected"       // counter
	metricInboxDuplicates  = "coordkit.outbox.inbox.duplicates"       // counter, attr consumer
	metricConsumerDone     = "coordkit.outbox.consumer.processed"     // counter: effects committed
	metricConsumerRedeliv  = "coordkit.outbox.consumer.redeliveries"  // counter: deliveries after the first
	metricConsumerFailures = "coordkit.outbox.consumer.handler_failures"
	metricConsumerDropped  = "coordkit.outbox.consumer.dead_lettered" // counter: messages given up

	attrTopic    = "coordkit.outbox.topic"
	attrConsumer = "coordkit.outbox.consumer"
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
	if m.lag, err = mt.Float64Histogram(metricPublishLag, metric.WithUnit("s"),
		metric.WithDescription("time from enqueue (created_at) to publication"),
		metric.WithExplicitBucketBoundaries(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)); err != nil {
		return nil, err
	}
	if m.published, err = mt.Int64Counter(metricPublished, metric.WithUnit("{event}"), metric.WithDescription("events published and marked")); err != nil {
		return nil, err
	}
	if m.retries, err = mt.Int64Counter(metricRetries, metric.WithUnit("{attempt}"), metric.WithDescription("failed publish attempts scheduled for retry")); err != nil {
		return nil, err
	}
	if m.parked, err = mt.Int64Counter(metricParked, metric.WithUnit("{event}"), metric.WithDescription("events moved to the dead-letter table")); err != nil {
		return nil, err
	}
	if m.rejected, err = mt.Int64Counter(metricEnqueueRejected, metric.WithUnit("{event}"), metric.WithDescription("events rejected by write-time validation")); err != nil {
		return nil, err
	}
	if m.dups, err = mt.Int64Counter(metricInboxDuplicates, metric.WithUnit("{delivery}"), metric.WithDescription("inbox deliveries skipped as duplicates")); err != nil {
		return nil, err
	}
	if !gauge {
		return m, nil
	}
	if _, err = mt.Float64ObservableGauge(metricOldestAge, metric.WithUnit("s"),
		metric.WithDescription("age of the oldest unpublished event, as last seen by a relay"),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(math.Float64frombits(m.oldest.Load()))
			return nil
		})); err != nil {
		return nil, err
	}
	return m, nil
}

// consumerMetrics are one Consumer's counters.
type consumerMetrics struct {
	processed, redeliveries, failures, dropped metric.Int64Counter
}

// newConsumerMetrics creates a consumer's counters from mp.
func newConsumerMetrics(mp metric.MeterProvider) (consumerMetrics, error) {
	mt := mp.Meter(coord.InstrumentationName + "/outbox")
	var m consumerMetrics
	var errs [4]error
	m.processed, errs[0] = mt.Int64Counter(metricConsumerDone, metric.WithUnit("{delivery}"),
		metric.WithDescription("deliveries whose effect committed"))
	m.redeliveries, errs[1] = mt.Int64Counter(metricConsumerRedeliv, metric.WithUnit("{delivery}"),
		metric.WithDescription("deliveries after the first of a message"))
	m.failures, errs[2] = mt.Int64Counter(metricConsumerFailures, metric.WithUnit("{delivery}"),
		metric.WithDescription("deliveries whose handler failed"))
	m.dropped, errs[3] = mt.Int64Counter(metricConsumerDropped, metric.WithUnit("{message}"),
		metric.WithDescription("messages given up (dead-lettered, terminated)"))
	if err := errors.Join(errs[:]...); err != nil {
		return consumerMetrics{}, fmt.Errorf("outbox: consumer metrics: %w", err)
	}
	return m, nil
}
