package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/coordkit/coordkit/coord"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
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
	if in.executions, err = m.Int64Counter(coord.MetricIdemExecutions, metric.WithDescription("requests whose effect ran and committed")); err != nil {
		return nil, err
	}
	if in.replays, err = m.Int64Counter(coord.MetricIdemReplays, metric.WithDescription("requests answered with a stored response")); err != nil {
		return nil, err
	}
	if in.conflicts, err = m.Int64Counter(coord.MetricIdemConflicts, metric.WithDescription("requests refused because a duplicate was in flight (409)")); err != nil {
		return nil, err
	}
	if in.mismatches, err = m.Int64Counter(coord.MetricIdemMismatches, metric.WithDescription("keys reused with a different request (422)")); err != nil {
		return nil, err
	}
	if in.inFlight, err = m.Float64Histogram(coord.MetricIdemInFlight, metric.WithUnit("ms"), metric.WithDescription("age of the in-flight request a duplicate ran into")); err != nil {
		return nil, err
	}
	if in.recovered, err = m.Int64Counter(coord.MetricIdemRecoveries, metric.WithDescription("abandoned phased requests finished by the completer")); err != nil {
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
	in.inFlight.Record(ctx, float64(age)/float64(time.Millisecond), attrs)
}
