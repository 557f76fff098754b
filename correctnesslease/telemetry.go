package correctnesslease

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/labelcap"
)

const instrumentation = coord.InstrumentationName + "/correctnesslease"

// instruments are the metrics of one Session (and the leases and runs on it).
type instruments struct {
	tracer        trace.Tracer
	acquisitions  metric.Int64Counter
	stepDowns     metric.Int64Counter
	renewLatency  metric.Float64Histogram
	heldSeconds   metric.Float64Histogram
	leaderChanges metric.Int64Counter
	keepalives    metric.Int64Counter
	tenant        attribute.KeyValue
	leases        *labelcap.Set // bounds the coord.lease values
}

func newInstruments(cfg Config) *instruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &instruments{
		tracer: cfg.TracerProvider.Tracer(instrumentation),
		tenant: attribute.String(coord.AttrTenant, cfg.Tenant),
		leases: labelcap.New(cfg.MaxLeaseLabels, func() {
			cfg.Logger.Warn("correctnesslease: more distinct lease names than Config.MaxLeaseLabels; metrics report further ones as coord.lease=\"other\"",
				"tenant", cfg.Tenant, "max_lease_labels", cfg.MaxLeaseLabels)
		}),
	}
	// Instrument constructors return a usable no-op instrument alongside any
	// error, so errors are only logged.
	var errs []error
	var err error
	in.acquisitions, err = m.Int64Counter(coord.MetricLeaseAcquisitions,
		metric.WithDescription("correctness leases acquired"))
	errs = append(errs, err)
	in.stepDowns, err = m.Int64Counter(coord.MetricLeaseStepDowns,
		metric.WithDescription("leases that lost authority, by reason (releases excluded)"))
	errs = append(errs, err)
	in.renewLatency, err = m.Float64Histogram(coord.MetricLeaseRenewLatency,
		metric.WithDescription("keepalive round trip, from send to answer"), metric.WithUnit("ms"))
	errs = append(errs, err)
	in.heldSeconds, err = m.Float64Histogram(coord.MetricLeaseHeldSeconds,
		metric.WithDescription("time a lease was held"), metric.WithUnit("s"))
	errs = append(errs, err)
	in.leaderChanges, err = m.Int64Counter(coord.MetricLeaderChanges,
		metric.WithDescription("terms started by Run"))
	errs = append(errs, err)
	in.keepalives, err = m.Int64Counter(coord.MetricKeepaliveRPCs,
		metric.WithDescription("keepalive RPCs sent (one per session, however many leases it holds)"))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			cfg.Logger.Warn("correctnesslease: metric instrument", "err", err)
		}
	}
	return in
}

// lease is the coord.lease attribute of a lease name, bounded by MaxLeaseLabels.
func (in *instruments) lease(name string) attribute.KeyValue {
	return attribute.String(coord.AttrLease, in.leases.Value(name))
}

func (in *instruments) acquired(lease string) {
	in.acquisitions.Add(context.Background(), 1, metric.WithAttributes(in.tenant, in.lease(lease)))
}

func (in *instruments) lost(lease string, reason coord.LossReason, held time.Duration) {
	leaseAttr := in.lease(lease)
	if held > 0 {
		in.heldSeconds.Record(context.Background(), held.Seconds(), metric.WithAttributes(in.tenant, leaseAttr))
	}
	if reason != coord.LossReleased {
		in.stepDowns.Add(context.Background(), 1, metric.WithAttributes(in.tenant,
			leaseAttr, attribute.String(coord.AttrReason, string(reason))))
	}
}

func (in *instruments) renewed(d time.Duration, ok bool) {
	outcome := "ok"
	if !ok {
		outcome = "error"
	}
	in.keepalives.Add(context.Background(), 1, metric.WithAttributes(in.tenant, attribute.String(coord.AttrOutcome, outcome)))
	if ok {
		in.renewLatency.Record(context.Background(), float64(d)/float64(time.Millisecond), metric.WithAttributes(in.tenant))
	}
}

func (in *instruments) elected(lease string) {
	in.leaderChanges.Add(context.Background(), 1, metric.WithAttributes(in.tenant, in.lease(lease)))
}
