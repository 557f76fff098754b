package ownership

import (
	"cmp"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/watchplane"
)

// Bounds and defaults of Config.
const (
	// MaxPartitions bounds Config.Partitions.
	MaxPartitions = 65536
	// MaxGroupLen bounds Config.Group, in bytes, so that every partition's
	// lease name (LeaseName) fits coord.MaxNameLen.
	MaxGroupLen = coord.MaxNameLen - len(leasePrefix) - len(".65535")
	// DefaultDrainTimeout: how long a revoked partition's owner may drain
	// before its key is released anyway. It bounds a planned handoff's pause
	// for a partition whose owner never calls Partition.Done.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultMaxAcquiring and MaxMaxAcquiring: Config.MaxAcquiring's default
	// and bound.
	DefaultMaxAcquiring = 256
	MaxMaxAcquiring     = 1024
)

// Config of one ownership group. Tenant, Group and Partitions are required;
// every other field has a default.
type Config struct {
	// Tenant owns the group's keys (coord.Key rules). The session given to Join
	// must be of the same tenant.
	Tenant string
	// Group names the group: same rules as a lease name (coord.ValidateName),
	// at most MaxGroupLen bytes.
	Group string
	// Partitions is P, fixed for the group's life: 1..MaxPartitions. Every
	// member must agree; Join returns a *ConfigError (Field "Partitions") when
	// the group's target in etcd has another count.
	Partitions int
	// DrainTimeout bounds a planned handoff: after a revoke, the partition's
	// key is released at Partition.Done or after DrainTimeout, whichever comes
	// first. Default DefaultDrainTimeout; must not be negative.
	DrainTimeout time.Duration
	// MaxAcquiring bounds the acquisitions a member has queueing at once. Their
	// queue transactions are committed together (correctnesslease's group
	// commit: up to 64 keys per transaction), so a member given many partitions
	// at once (a join, a takeover) queues 256 of them in about four
	// transactions. Before the group commit each was its own transaction and
	// 64 in flight made a member step down (its keepalive starved) when it was
	// given 1,000 partitions on a loaded 2-core test box with TTL 3 s. Default
	// DefaultMaxAcquiring; 1..MaxMaxAcquiring.
	MaxAcquiring int
	// Quotas paces the member's etcd writes — every partition it queues for
	// and releases, and the target — to the tenant's write quota (RFC MUST 7:
	// 200 writes/s unless approved): a member given more partitions than the
	// quota's burst acquires them at the quota's rate, counted in
	// coordkit.ownership.quota_delayed. Approve a larger group with an override
	// (coord.QuotaConfig.Overrides); share one *coord.Quotas across the
	// process to pace a tenant's writes together. Default: a Quotas of the
	// group's own with coord's default limits.
	Quotas *coord.Quotas
	// Logger receives acquisitions, revokes, losses and target writes. Default
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider for the coord.ownership.* metrics. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider for Join, Leave and Snapshot spans. Default
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// PrivateWatches gives the group a watch plane of its own (its own
	// upstream etcd watches, closed by Group.Close) instead of the client's
	// shared one. Default false: a member follows the member keys, the target
	// and the partition keys through the client's shared plane.
	PrivateWatches bool

	// backoffRand replaces the random draw of the acquire and release retry
	// backoffs in tests of their schedule; nil draws from math/rand as usual.
	backoffRand func(n int64) int64
}

func (c Config) withDefaults() Config {
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	c.MaxAcquiring = cmp.Or(c.MaxAcquiring, DefaultMaxAcquiring)
	if c.Quotas == nil {
		c.Quotas = coord.NewQuotas(coord.QuotaConfig{})
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	return c
}

func (c Config) validate() error {
	if err := checkNames(c.Tenant, c.Group); err != nil {
		return err
	}
	switch {
	case c.Partitions < 1 || c.Partitions > MaxPartitions:
		return &ConfigError{Field: "Partitions", Reason: strconv.Itoa(c.Partitions) + " outside [1, " + strconv.Itoa(MaxPartitions) + "]"}
	case c.DrainTimeout < 0:
		return &ConfigError{Field: "DrainTimeout", Reason: "negative"}
	case c.MaxAcquiring < 1 || c.MaxAcquiring > MaxMaxAcquiring:
		return &ConfigError{Field: "MaxAcquiring", Reason: strconv.Itoa(c.MaxAcquiring) + " outside [1, " + strconv.Itoa(MaxMaxAcquiring) + "]"}
	}
	return nil
}

// checkNames validates a tenant and a group name; errors are *ConfigError
// unwrapping to the *coord.NameError.
func checkNames(tenant, group string) error {
	for _, f := range []struct {
		field, v string
		max      int
	}{{"Tenant", tenant, coord.MaxTenantLen}, {"Group", group, MaxGroupLen}} {
		if err := coord.ValidateName(f.field, f.v, f.max); err != nil {
			ne := err.(*coord.NameError) // ValidateName returns nothing else
			return &ConfigError{Field: f.field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
		}
	}
	return nil
}

// Group is one ownership group as configured; Join makes this process a member.
// It holds no goroutine and no etcd state of its own. Safe for concurrent use.
type Group struct {
	cli   *clientv3.Client
	cfg   Config
	keys  keys
	plane *watchplane.Plane // the members follow the group's keys through it
}

// New validates cfg and returns the Group. It does no I/O and does not block.
// It returns a *ConfigError (ErrInvalidConfig; for an invalid name it unwraps to
// the *coord.NameError).
func New(cli *clientv3.Client, cfg Config) (*Group, error) {
	if cli == nil {
		return nil, &ConfigError{Field: "client", Reason: "nil *clientv3.Client"}
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Group{cli: cli, cfg: cfg, keys: newKeys(cfg.Tenant, cfg.Group)}
	if cfg.PrivateWatches {
		g.plane = watchplane.New(cli, watchplane.Config{Logger: cfg.Logger, MeterProvider: cfg.MeterProvider})
	} else {
		g.plane = watchplane.For(cli, nil)
	}
	return g, nil
}

// Close closes the group's own watch plane (Config.PrivateWatches); call it
// after every member of the group in this process has stopped. A group on the
// client's shared plane holds nothing to close (the plane ends with the
// client): Close does nothing. It does not block on etcd.
func (g *Group) Close() {
	if g.cfg.PrivateWatches {
		g.plane.Close()
	}
}
