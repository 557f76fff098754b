package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

const instrumentation = coord.InstrumentationName + "/schedule"

// instruments are a Scheduler's metrics.
type instruments struct {
	tenant     attribute.KeyValue
	fires      metric.Int64Counter
	lag        metric.Float64Histogram
	missed     metric.Int64Counter
	duplicates metric.Int64Counter
	clock      coord.Clock

	mu      sync.Mutex
	success map[string]time.Time // owned job → its last success (or registration)
}

func newInstruments(cfg Config) (*instruments, error) {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &instruments{tenant: attribute.String(coord.AttrTenant, cfg.Tenant), clock: cfg.Clock, success: map[string]time.Time{}}
	var errs []error
	var e error
	in.fires, e = m.Int64Counter(coord.MetricScheduleFires, metric.WithUnit("{fire}"),
		metric.WithDescription("Fire (or batch) transactions committed, by outcome."))
	errs = append(errs, e)
	in.lag, e = m.Float64Histogram(coord.MetricScheduleLag, metric.WithUnit("ms"),
		metric.WithDescription("From a scheduled fire's nominal time to the commit of its transaction."))
	errs = append(errs, e)
	in.missed, e = m.Int64Counter(coord.MetricScheduleMissed, metric.WithUnit("{fire}"),
		metric.WithDescription("Fires that will not run, by reason."))
	errs = append(errs, e)
	in.duplicates, e = m.Int64Counter(coord.MetricScheduleDuplicates, metric.WithUnit("{fire}"),
		metric.WithDescription("Fire attempts refused: by the fence (a stale token) or by the key (the identity was already recorded)."))
	errs = append(errs, e)
	_, e = m.Float64ObservableGauge(coord.MetricScheduleSuccessAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the last successful fire of each job this scheduler owns."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			now := in.clock.Now()
			in.mu.Lock()
			defer in.mu.Unlock()
			for job, at := range in.success {
				o.Observe(now.Sub(at).Seconds(), metric.WithAttributes(in.tenant, attribute.String(coord.AttrScheduleJob, job)))
			}
			return nil
		}))
	if err := errors.Join(append(errs, e)...); err != nil {
		return nil, fmt.Errorf("schedule: instruments: %w", err)
	}
	return in, nil
}

func (in *instruments) attrs(job string, kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{in.tenant, attribute.String(coord.AttrScheduleJob, job)}, kv...)...)
}

func (in *instruments) fired(ctx context.Context, job, outcome string) {
	in.fires.Add(ctx, 1, in.attrs(job, attribute.String(coord.AttrOutcome, outcome)))
}

func (in *instruments) lagged(ctx context.Context, job string, lag time.Duration) {
	in.lag.Record(ctx, float64(lag)/float64(time.Millisecond), in.attrs(job))
}

func (in *instruments) miss(ctx context.Context, job, reason string, n int) {
	if n > 0 {
		in.missed.Add(ctx, int64(n), in.attrs(job, attribute.String(coord.AttrReason, reason)))
	}
}

func (in *instruments) duplicate(ctx context.Context, job, by string) {
	in.duplicates.Add(ctx, 1, in.attrs(job, attribute.String(coord.AttrReason, by)))
}

// own and disown keep the set of jobs whose last-success age is reported.
func (in *instruments) own(job string, lastSuccess time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.success[job] = lastSuccess
}

func (in *instruments) disown(job string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.success, job)
}

func (in *instruments) succeeded(job string, at time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.success[job]; ok {
		in.success[job] = at
	}
}
