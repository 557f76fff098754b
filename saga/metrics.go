package saga

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Metric names and the package's own attributes (docs/metrics.md).
const (
	metricStateAge             = "coordkit.saga.state.age"             // gauge: oldest non-terminal, attrs type+state
	metricCompensationFailures = "coordkit.saga.compensation_failures" // counter
	metricSteps                = "coordkit.saga.steps"                 // counter
	metricRetries              = "coordkit.saga.retries"               // counter

	attrType    = "coordkit.saga.type"
	attrState   = "coordkit.saga.state"
	attrStep    = "coordkit.saga.step"
	attrID      = "coordkit.saga.id"      // spans only: unbounded
	attrAttempt = "coordkit.saga.attempt" // spans only
)

type metrics struct {
	steps, retries, compFailures metric.Int64Counter
	reg                          metric.Registration
}

func newMetrics(c *Client) (*metrics, error) {
	meter := c.cfg.MeterProvider.Meter(coord.InstrumentationName + "/saga")
	m := &metrics{}
	var err error
	if m.steps, err = meter.Int64Counter(metricSteps, metric.WithUnit("{call}"),
		metric.WithDescription("saga step and compensation calls, by type, step and outcome")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	if m.retries, err = meter.Int64Counter(metricRetries, metric.WithUnit("{attempt}"),
		metric.WithDescription("failed step or compensation attempts scheduled for retry")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	if m.compFailures, err = meter.Int64Counter(metricCompensationFailures, metric.WithUnit("{attempt}"),
		metric.WithDescription("failed compensation attempts; the saga pages after Config.CompensationAttempts")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	age, err := meter.Float64ObservableGauge(metricStateAge, metric.WithUnit("s"),
		metric.WithDescription("age in its current state of the oldest non-terminal saga, by type and state"))
	if err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	m.reg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		rows, err := c.pool.Query(ctx, c.q.age)
		if err != nil {
			return fmt.Errorf("saga: state age: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var typ, state string
			var v float64
			if err := rows.Scan(&typ, &state, &v); err != nil {
				return fmt.Errorf("saga: state age: %w", err)
			}
			o.ObserveFloat64(age, v, metric.WithAttributes(
				attribute.String(attrType, typ), attribute.String(attrState, state)))
		}
		return rows.Err()
	}, age)
	if err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	return m, nil
}

func (m *metrics) close() error { return m.reg.Unregister() }

func stepAttrs(typ, step, outcome string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String(attrType, typ),
		attribute.String(attrStep, step), attribute.String(coord.AttrOutcome, outcome))
}
