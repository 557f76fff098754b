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

// Metric names and the package's own attribute (docs/metrics.md). Every metric
// carries the tenant and the job.
const (
	metricFires      = "coordkit.schedule.fires"               // counter, attr outcome (ok, running, failed, missed)
	metricFireLag    = "coordkit.schedule.fire.lag"            // histogram: nominal time → commit of a fire's (first) transaction
	metricMissed     = "coordkit.schedule.missed"              // counter, attr reason
	metricDuplicates = "coordkit.schedule.duplicates_rejected" // counter, attr reason (fence, key)
	metricSuccessAge = "coordkit.schedule.last_success.age"    // gauge: age of each owned job's last successful fire
	attrJob          = "coordkit.schedule.job"
)

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
	in.fires, e = m.Int64Counter(metricFires, metric.WithUnit("{fire}"),
		metric.WithDescription("Fire (or batch) transactions committed, by outcome."))
	errs = append(errs, e)
	in.lag, e = m.Float64Histogram(metricFireLag, metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600),
		metric.WithDescription("From a scheduled fire's nominal time to the commit of its transaction."))
	errs = append(errs, e)
	in.missed, e = m.Int64Counter(metricMissed, metric.WithUnit("{fire}"),
		metric.WithDescription("Fires that will not run, by reason."))
	errs = append(errs, e)
	in.duplicates, e = m.Int64Counter(metricDuplicates, metric.WithUnit("{fire}"),
		metric.WithDescription("Fire attempts refused: by the fence (a stale token) or by the key (the identity was already recorded)."))
	errs = append(errs, e)
	_, e = m.Float64ObservableGauge(metricSuccessAge, metric.WithUnit("s"),
		metric.WithDescription("Age of the last successful fire of each job this scheduler owns."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			now := in.clock.Now()
			in.mu.Lock()
			defer in.mu.Unlock()
			for job, at := range in.success {
				o.Observe(now.Sub(at).Seconds(), metric.WithAttributes(in.tenant, attribute.String(attrJob, job)))
			}
			return nil
		}))
	if err := errors.Join(append(errs, e)...); err != nil {
		return nil, fmt.Errorf("schedule: instruments: %w", err)
	}
	return in, nil
}

func (in *instruments) attrs(job string, kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append([]attribute.KeyValue{in.tenant, attribute.String(attrJob, job)}, kv...)...)
}

func (in *instruments) fired(ctx context.Context, job, outcome string) {
	in.fires.Add(ctx, 1, in.attrs(job, attribute.String(coord.AttrOutcome, outcome)))
}

func (in *instruments) lagged(ctx context.Context, job string, lag time.Duration) {
	in.lag.Record(ctx, lag.Seconds(), in.attrs(job))
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
