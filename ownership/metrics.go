package ownership

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

const instrumentation = coord.InstrumentationName + "/ownership"

// Metric names and the package's own attributes (docs/metrics.md). Every metric
// carries the tenant, group and member.
const (
	metricOwned           = "coordkit.ownership.owned"            // gauge: partitions this member holds
	metricUnowned         = "coordkit.ownership.unowned"          // gauge: assigned to this member, not held yet
	metricMoves           = "coordkit.ownership.moves"            // counter: partitions given up, attr reason
	metricHandoffDuration = "coordkit.ownership.handoff.duration" // histogram: assigned → held
	metricTargetWrites    = "coordkit.ownership.target_writes"    // counter: 0 in steady state
	metricQuotaDelayed    = "coordkit.ownership.quota_delayed"    // counter: writes delayed by the tenant's write quota

	attrGroup  = "coordkit.ownership.group"
	attrMember = "coordkit.ownership.member"
)

// instruments are the metrics of one Member.
type instruments struct {
	attrs   attribute.Set
	tracer  trace.Tracer
	owned   metric.Int64ObservableGauge
	unowned metric.Int64ObservableGauge
	moves   metric.Int64Counter
	handoff metric.Float64Histogram
	writes  metric.Int64Counter
	waits   metric.Int64Counter
	unreg   metric.Registration
}

// newInstruments builds the member's instruments; counts reports (owned,
// assigned but not held) for the gauges.
func newInstruments(cfg Config, member string, counts func() (int, int)) *instruments {
	m := cfg.MeterProvider.Meter(instrumentation)
	in := &instruments{
		tracer: cfg.TracerProvider.Tracer(instrumentation),
		attrs: attribute.NewSet(attribute.String(coord.AttrTenant, cfg.Tenant),
			attribute.String(attrGroup, cfg.Group), attribute.String(attrMember, member)),
	}
	// Instrument constructors return a usable no-op instrument alongside any
	// error, so errors are only logged.
	var errs [7]error
	in.owned, errs[0] = m.Int64ObservableGauge(metricOwned, metric.WithUnit("{partition}"),
		metric.WithDescription("partitions this member holds"))
	in.unowned, errs[1] = m.Int64ObservableGauge(metricUnowned, metric.WithUnit("{partition}"),
		metric.WithDescription("partitions the target gives this member that it does not hold yet; the sum over members is the group's unowned partitions"))
	in.moves, errs[2] = m.Int64Counter(metricMoves, metric.WithUnit("{partition}"),
		metric.WithDescription("partitions this member gave up or lost, by reason"))
	in.handoff, errs[3] = m.Float64Histogram(metricHandoffDuration,
		metric.WithDescription("time from the target giving this member a partition to holding it"), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
	in.writes, errs[4] = m.Int64Counter(metricTargetWrites, metric.WithUnit("{write}"),
		metric.WithDescription("assignment targets written by this member (zero in steady state)"))
	in.waits, errs[6] = m.Int64Counter(metricQuotaDelayed, metric.WithUnit("{write}"),
		metric.WithDescription("this member's etcd writes (queueing for a partition, releasing one, the target) that waited for the tenant's write quota: a group larger than the quota paces itself"))
	in.unreg, errs[5] = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		owned, pending := counts()
		o.ObserveInt64(in.owned, int64(owned), metric.WithAttributeSet(in.attrs))
		o.ObserveInt64(in.unowned, int64(pending), metric.WithAttributeSet(in.attrs))
		return nil
	}, in.owned, in.unowned)
	for _, err := range errs {
		if err != nil {
			cfg.Logger.Warn("ownership: metric instrument", "err", err)
		}
	}
	return in
}

func (in *instruments) moved(reason Reason) {
	in.moves.Add(context.Background(), 1, metric.WithAttributeSet(in.attrs),
		metric.WithAttributes(attribute.String(coord.AttrReason, string(reason))))
}

func (in *instruments) acquired(d time.Duration) {
	in.handoff.Record(context.Background(), d.Seconds(), metric.WithAttributeSet(in.attrs))
}

func (in *instruments) wroteTarget() {
	in.writes.Add(context.Background(), 1, metric.WithAttributeSet(in.attrs))
}

func (in *instruments) quotaDelayed(n int) {
	in.waits.Add(context.Background(), int64(n), metric.WithAttributeSet(in.attrs))
}

func (in *instruments) close() {
	if in.unreg != nil {
		_ = in.unreg.Unregister()
	}
}
