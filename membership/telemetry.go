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
	in.registered, errs[0] = m.Int64ObservableGauge(coord.MetricMemberRegistered,
		metric.WithDescription("1 while the instance's key is in etcd under a live lease, else 0"))
	in.losses, errs[1] = m.Int64Counter(coord.MetricMemberLosses,
		metric.WithDescription("registrations lost (lease expired, key deleted or overwritten), by reason"))
	in.recovery, errs[2] = m.Float64Histogram(coord.MetricMemberRecoveryMs,
		metric.WithDescription("time from noticing a loss to being registered again"), metric.WithUnit("ms"))
	in.keepalives, errs[3] = m.Int64Counter(coord.MetricKeepaliveRPCs,
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
	in.recovery.Record(context.Background(), float64(d)/float64(time.Millisecond), metric.WithAttributeSet(attrs))
}

// watchInstruments are the metrics of one Watcher.
type watchInstruments struct {
	attrs     attribute.Set
	staleness metric.Float64ObservableGauge
	members   metric.Int64ObservableGauge
	resumes   metric.Int64Counter
	relists   metric.Int64Counter
	unreg     metric.Registration
}

func newWatchInstruments(cfg WatchConfig, tenant, service string, w *Watcher) *watchInstruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &watchInstruments{attrs: attribute.NewSet(
		attribute.String(coord.AttrTenant, tenant), attribute.String(coord.AttrService, service))}
	var errs [5]error
	in.staleness, errs[0] = m.Float64ObservableGauge(coord.MetricClientStaleness,
		metric.WithDescription("time since the view was last confirmed current"), metric.WithUnit("s"))
	in.members, errs[1] = m.Int64ObservableGauge(coord.MetricMemberCount,
		metric.WithDescription("members in the watcher's view"))
	in.resumes, errs[2] = m.Int64Counter(coord.MetricMemberResumes,
		metric.WithDescription("watches resumed from the last revision after an error"))
	in.relists, errs[3] = m.Int64Counter(coord.MetricMemberRelists,
		metric.WithDescription("re-lists after the watch revision was compacted"))
	in.unreg, errs[4] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
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
