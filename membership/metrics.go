package membership

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

const instrumentation = coord.InstrumentationName + "/membership"

// Metric names and the package's own attributes (docs/metrics.md).
const (
	metricRegistered     = "coordkit.membership.registered"              // gauge 0/1 per instance
	metricLosses         = "coordkit.membership.losses"                  // counter: registrations lost, attr reason
	metricReregistration = "coordkit.membership.reregistration.duration" // histogram: loss noticed → registered again
	metricKeepalives     = "coordkit.membership.keepalives"              // counter, attr outcome
	metricMembers        = "coordkit.membership.members"                 // gauge: members in a watcher's view
	metricStaleness      = "coordkit.membership.staleness"               // gauge: since the view was last confirmed
	metricRelists        = "coordkit.membership.relists"                 // counter: re-lists after compaction

	attrService        = "coordkit.membership.service"
	attrInstance       = "coordkit.membership.instance"
	attrLeaseID        = "coordkit.membership.lease_id"        // spans only
	attrCreateRevision = "coordkit.membership.create_revision" // spans only
)

// sessionInstruments are the metrics of one Session and its registrations.
type sessionInstruments struct {
	meter      metric.Meter
	tracer     trace.Tracer
	registered metric.Int64ObservableGauge
	losses     metric.Int64Counter
	recovery   metric.Float64Histogram
	keepalives metric.Int64Counter
}

func newSessionInstruments(cfg SessionConfig) *sessionInstruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &sessionInstruments{meter: m, tracer: cfg.TracerProvider.Tracer(instrumentation)}
	// Instrument constructors return a usable no-op instrument alongside any
	// error, so errors are only logged.
	var errs [4]error
	in.registered, errs[0] = m.Int64ObservableGauge(metricRegistered, metric.WithUnit("{instance}"),
		metric.WithDescription("1 while the instance's key is in etcd under a live lease, else 0"))
	in.losses, errs[1] = m.Int64Counter(metricLosses, metric.WithUnit("{registration}"),
		metric.WithDescription("registrations lost (lease expired, key deleted or overwritten), by reason"))
	in.recovery, errs[2] = m.Float64Histogram(metricReregistration,
		metric.WithDescription("time from noticing a loss to being registered again"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	in.keepalives, errs[3] = m.Int64Counter(metricKeepalives, metric.WithUnit("{call}"),
		metric.WithDescription("keepalive RPCs sent (one per session per TTL/3, however many registrations)"))
	for _, err := range errs {
		if err != nil {
			cfg.Logger.Warn("membership: metric instrument", "err", err)
		}
	}
	return in
}

func (in *sessionInstruments) keepalive(ok bool) {
	outcome := "ok"
	if !ok {
		outcome = "error"
	}
	in.keepalives.Add(context.Background(), 1, metric.WithAttributes(attribute.String(coord.AttrOutcome, outcome)))
}

func (in *sessionInstruments) lost(attrs attribute.Set, reason coord.LossReason) {
	in.losses.Add(context.Background(), 1, metric.WithAttributeSet(attrs),
		metric.WithAttributes(attribute.String(coord.AttrReason, string(reason))))
}

func (in *sessionInstruments) recovered(attrs attribute.Set, d time.Duration) {
	in.recovery.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(attrs))
}

// watchInstruments are the metrics of one Watcher.
type watchInstruments struct {
	attrs     attribute.Set
	staleness metric.Float64ObservableGauge
	members   metric.Int64ObservableGauge
	relists   metric.Int64Counter
	unreg     metric.Registration
}

func newWatchInstruments(cfg WatchConfig, tenant, service string, w *Watcher) *watchInstruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &watchInstruments{attrs: attribute.NewSet(
		attribute.String(coord.AttrTenant, tenant), attribute.String(attrService, service))}
	var errs [4]error
	in.staleness, errs[0] = m.Float64ObservableGauge(metricStaleness,
		metric.WithDescription("time since the view was last confirmed current"), metric.WithUnit("s"))
	in.members, errs[1] = m.Int64ObservableGauge(metricMembers, metric.WithUnit("{member}"),
		metric.WithDescription("members in the watcher's view"))
	in.relists, errs[2] = m.Int64Counter(metricRelists, metric.WithUnit("{read}"),
		metric.WithDescription("resyncs of the view from the watch plane after the first (a compaction, or the watcher fell behind)"))
	in.unreg, errs[3] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(in.staleness, w.Staleness().Seconds(), metric.WithAttributeSet(in.attrs))
		o.ObserveInt64(in.members, int64(len(w.View().Members)), metric.WithAttributeSet(in.attrs))
		return nil
	}, in.staleness, in.members)
	for _, err := range errs {
		if err != nil {
			cfg.Logger.Warn("membership: metric instrument", "err", err)
		}
	}
	return in
}

func (in *watchInstruments) close() {
	if in.unreg != nil {
		_ = in.unreg.Unregister()
	}
}
