package coord

// InstrumentationName is the name every coordkit package passes to
// otel.Meter/otel.Tracer (with its own package path appended where useful).
const InstrumentationName = "github.com/coordkit/coordkit"

// Metric names live beside their package, in its metrics.go
// (coordkit.<package>.<what>, no unit in the name: docs/metrics.md). The
// attribute keys below are the ones several packages share; a package's own
// keys sit beside its metrics.

// Attribute keys shared by several packages' metrics, spans and logs.
const (
	AttrTenant  = "coordkit.tenant"  // the tenant of a key, lease or instance
	AttrLease   = "coordkit.lease"   // a lease name (bounded: see Config.MaxLeaseLabels)
	AttrReason  = "coordkit.reason"  // why authority, a lock or a registration was lost
	AttrOutcome = "coordkit.outcome" // the outcome of a call
	AttrQuota   = "coordkit.quota"   // the quota a write exceeded (coord.QuotaError.Quota)
)
