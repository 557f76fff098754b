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

// Metric names (docs/metrics.md).
const (
	metricAcquisitions    = "coordkit.correctnesslease.acquisitions"     // counter
	metricStepDowns       = "coordkit.correctnesslease.step_downs"       // counter, attr reason
	metricRenewalDuration = "coordkit.correctnesslease.renewal.duration" // histogram: keepalive round trip
	metricHoldDuration    = "coordkit.correctnesslease.hold.duration"    // histogram: time as holder
	metricLeaderChanges   = "coordkit.correctnesslease.leader.changes"   // counter: terms started by Run
	metricKeepalives      = "coordkit.correctnesslease.keepalives"       // counter, attr outcome

	attrTokenRevision = "coordkit.correctnesslease.token_revision" // spans only
	attrLeaseID       = "coordkit.correctnesslease.lease_id"       // spans only: the session's etcd lease, hex
)

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
	leases        *labelcap.Set // bounds the coordkit.lease values
}

func newInstruments(cfg Config) *instruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &instruments{
		tracer: cfg.TracerProvider.Tracer(instrumentation),
		tenant: attribute.String(coord.AttrTenant, cfg.Tenant),
		leases: labelcap.New(cfg.MaxLeaseLabels, func() {
			cfg.Logger.Warn("correctnesslease: more distinct lease names than Config.MaxLeaseLabels; metrics report further ones as coordkit.lease=\"other\"",
				"tenant", cfg.Tenant, "max_lease_labels", cfg.MaxLeaseLabels)
		}),
	}
	// Instrument constructors return a usable no-op instrument alongside any
	// error, so errors are only logged.
	var errs []error
	var err error
	in.acquisitions, err = m.Int64Counter(metricAcquisitions,
		metric.WithDescription("correctness leases acquired"), metric.WithUnit("{lease}"))
	errs = append(errs, err)
	in.stepDowns, err = m.Int64Counter(metricStepDowns,
		metric.WithDescription("leases that lost authority, by reason (releases excluded)"), metric.WithUnit("{lease}"))
	errs = append(errs, err)
	in.renewLatency, err = m.Float64Histogram(metricRenewalDuration,
		metric.WithDescription("keepalive round trip, from send to answer"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
	errs = append(errs, err)
	in.heldSeconds, err = m.Float64Histogram(metricHoldDuration,
		metric.WithDescription("time a lease was held"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(1, 5, 15, 60, 300, 900, 3600, 14400, 86400))
	errs = append(errs, err)
	in.leaderChanges, err = m.Int64Counter(metricLeaderChanges,
		metric.WithDescription("terms started by Run"), metric.WithUnit("{term}"))
	errs = append(errs, err)
	in.keepalives, err = m.Int64Counter(metricKeepalives,
		metric.WithDescription("keepalive RPCs sent (one per session, however many leases it holds)"), metric.WithUnit("{call}"))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			cfg.Logger.Warn("correctnesslease: metric instrument", "err", err)
		}
	}
	return in
}

// lease is the coordkit.lease attribute of a lease name, bounded by MaxLeaseLabels.
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
		in.renewLatency.Record(context.Background(), d.Seconds(), metric.WithAttributes(in.tenant))
	}
}

func (in *instruments) elected(lease string) {
	in.leaderChanges.Add(context.Background(), 1, metric.WithAttributes(in.tenant, in.lease(lease)))
}
