package idempotency

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

// Metric names (docs/metrics.md).
const (
	metricExecutions  = "coordkit.idempotency.executions"          // counter
	metricReplays     = "coordkit.idempotency.replays"             // counter
	metricConflicts   = "coordkit.idempotency.conflicts"           // counter: 409
	metricMismatches  = "coordkit.idempotency.mismatches"          // counter: 422
	metricInFlightAge = "coordkit.idempotency.in_flight.age"       // histogram
	metricRecovered   = "coordkit.idempotency.completer.recovered" // counter
)

type instruments struct {
	executions metric.Int64Counter
	replays    metric.Int64Counter
	conflicts  metric.Int64Counter
	mismatches metric.Int64Counter
	inFlight   metric.Float64Histogram
	recovered  metric.Int64Counter
}

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(coord.InstrumentationName + "/idempotency")
	var in instruments
	var err error
	if in.executions, err = m.Int64Counter(metricExecutions, metric.WithUnit("{request}"), metric.WithDescription("requests whose effect ran and committed")); err != nil {
		return nil, err
	}
	if in.replays, err = m.Int64Counter(metricReplays, metric.WithUnit("{request}"), metric.WithDescription("requests answered with a stored response")); err != nil {
		return nil, err
	}
	if in.conflicts, err = m.Int64Counter(metricConflicts, metric.WithUnit("{request}"), metric.WithDescription("requests refused because a duplicate was in flight (409)")); err != nil {
		return nil, err
	}
	if in.mismatches, err = m.Int64Counter(metricMismatches, metric.WithUnit("{request}"), metric.WithDescription("keys reused with a different request (422)")); err != nil {
		return nil, err
	}
	if in.inFlight, err = m.Float64Histogram(metricInFlightAge, metric.WithUnit("s"), metric.WithDescription("age of the in-flight request a duplicate ran into"),
		metric.WithExplicitBucketBoundaries(0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300)); err != nil {
		return nil, err
	}
	if in.recovered, err = m.Int64Counter(metricRecovered, metric.WithUnit("{request}"), metric.WithDescription("abandoned phased requests finished by the completer")); err != nil {
		return nil, err
	}
	return &in, nil
}

// span starts the span of one Do, DoTx or Run; end records its outcome.
func (s *Store) span(ctx context.Context, name string, key Key) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithAttributes(attribute.String(coord.AttrTenant, key.Scope)))
}

// endSpan ends sp with the outcome of res and err.
func endSpan(sp trace.Span, res Result, err error) {
	outcome := "executed"
	switch {
	case err != nil:
		outcome = "error"
		var me *MismatchError
		var ife *InFlightError
		if errors.As(err, &me) {
			outcome = "mismatch"
		} else if errors.As(err, &ife) {
			outcome = "in_flight"
		} else {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
	case res.Replayed:
		outcome = "replayed"
	}
	sp.SetAttributes(attribute.String(coord.AttrOutcome, outcome))
	sp.End()
}

func (in *instruments) conflict(ctx context.Context, age time.Duration, op string) {
	attrs := metric.WithAttributes(attribute.String(coord.AttrOutcome, op))
	in.conflicts.Add(ctx, 1, attrs)
	in.inFlight.Record(ctx, age.Seconds(), attrs)
}
