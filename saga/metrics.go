package saga

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

type metrics struct {
	steps, retries, compFailures metric.Int64Counter
	reg                          metric.Registration
}

func newMetrics(c *Client) (*metrics, error) {
	meter := c.cfg.MeterProvider.Meter(coord.InstrumentationName + "/saga")
	m := &metrics{}
	var err error
	if m.steps, err = meter.Int64Counter(coord.MetricSagaSteps,
		metric.WithDescription("saga step and compensation calls, by type, step and outcome")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	if m.retries, err = meter.Int64Counter(coord.MetricSagaRetries,
		metric.WithDescription("failed step or compensation attempts scheduled for retry")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	if m.compFailures, err = meter.Int64Counter(coord.MetricSagaCompensationFailure,
		metric.WithDescription("failed compensation attempts; the saga pages after Config.CompensationAttempts")); err != nil {
		return nil, fmt.Errorf("saga: metrics: %w", err)
	}
	age, err := meter.Float64ObservableGauge(coord.MetricSagaStateAge, metric.WithUnit("s"),
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
				attribute.String(coord.AttrSaga, typ), attribute.String(coord.AttrState, state)))
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
	return metric.WithAttributes(attribute.String(coord.AttrSaga, typ),
		attribute.String(coord.AttrStep, step), attribute.String(coord.AttrOutcome, outcome))
}
