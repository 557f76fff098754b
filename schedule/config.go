package schedule

import (
	"cmp"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/ownership"
)

// Defaults of Config and Job.
const (
	// DefaultGroup is the ownership group the schedulers of a tenant form.
	DefaultGroup = "schedule"
	// DefaultPartitions is P: jobs hash onto P ownership partitions, so a
	// failover moves only the jobs of the partitions that move.
	DefaultPartitions = 64
	// DefaultTable is the jobs table; the fires, requests and audit tables
	// are named after it (Table + "_fires", "_requests", "_audit").
	DefaultTable = "coord_schedule"
	// DefaultPollInterval: how often a scheduler reads the operators'
	// requests (Trigger, Backfill) for its jobs.
	DefaultPollInterval = 2 * time.Second
	// DefaultZone of a Job.
	DefaultZone = "UTC"
	// DefaultMaxCatchUp of a Job: CatchUpAll runs at most this many fires at
	// once, never a burst of every missed one.
	DefaultMaxCatchUp = 10
	// DefaultWindow of a Job: a fire may start up to an hour late.
	DefaultWindow = time.Hour
	// DefaultTimeout of a Job's Handler call.
	DefaultTimeout = time.Minute
	// DefaultMaxAttempts of a Job's Handler per fire or batch.
	DefaultMaxAttempts = 3
	// DefaultRetryBase and DefaultRetryCap bound the full-jitter backoff
	// between attempts of a failed or busy fire.
	DefaultRetryBase = 100 * time.Millisecond
	DefaultRetryCap  = 5 * time.Second
	// MinEvery bounds Job.Every from below.
	MinEvery = 10 * time.Millisecond
)

// Names derived from Config.Table.
var (
	firesTable    = pgschema.Derived{Suffix: "_fires", What: "fires table"}
	requestsTable = pgschema.Derived{Suffix: "_requests", What: "requests table"}
	auditTable    = pgschema.Derived{Suffix: "_audit", What: "audit table"}
	runningIdx    = pgschema.Derived{Suffix: "_fires_running", What: "index"}
	pendingIdx    = pgschema.Derived{Suffix: "_requests_pending", What: "index"}
)

// Config of a Scheduler. Tenant is required; every other field has a default.
type Config struct {
	// Tenant owns the jobs, their ownership group and their rows (coord rules
	// for a tenant name). The session given to Run must be of this tenant.
	Tenant string
	// Group is the ownership group the tenant's schedulers form. Default
	// DefaultGroup.
	Group string
	// Partitions is P, fixed for the group's life (ownership.Config): a job
	// runs on the owner of partition hash(name) mod P. Default
	// DefaultPartitions.
	Partitions int
	// Schema of the tables; empty: the connection's search_path.
	Schema string
	// Table is the jobs table's name; the fires, requests and audit tables
	// add a suffix to it (each name at most 63 bytes). Default DefaultTable.
	Table string
	// Fence checks the partitions' tokens in each fire's transaction.
	// Default: pgfence's default table, with LeaseTTL the session's TTL.
	Fence *pgfence.Fence
	// PollInterval: how often a scheduler reads the operators' Trigger and
	// Backfill requests for its jobs. Default DefaultPollInterval.
	PollInterval time.Duration
	// Retry is the backoff between attempts of a fire whose handler failed or
	// whose fence row was busy. Default Base DefaultRetryBase, Cap
	// DefaultRetryCap.
	Retry coord.Backoff
	// DrainTimeout of the ownership group: how long a revoked partition's
	// fires may finish. Default ownership.DefaultDrainTimeout.
	DrainTimeout time.Duration
	// Clock tells the schedule's time (nominal times, lag, catch-up, the
	// poll). Default coord.SystemClock(). Retry backoffs, which wait for
	// PostgreSQL, run on the system clock.
	Clock coord.Clock
	// Logger receives fires, misses and rejections. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider for the schedule.* metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

func (c Config) withDefaults() Config {
	c.Group = cmp.Or(c.Group, DefaultGroup)
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.Retry.Base = cmp.Or(c.Retry.Base, DefaultRetryBase)
	c.Retry.Cap = cmp.Or(c.Retry.Cap, DefaultRetryCap)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, ownership.DefaultDrainTimeout)
	c.Clock = coord.OrSystem(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

func (c Config) validate() error {
	if err := coord.ValidateName("Tenant", c.Tenant, coord.MaxTenantLen); err != nil {
		return &ConfigError{Field: "Tenant", Reason: err.Error(), Err: err}
	}
	if err := coord.ValidateName("Group", c.Group, ownership.MaxGroupLen); err != nil {
		return &ConfigError{Field: "Group", Reason: err.Error(), Err: err}
	}
	if ne := pgschema.CheckTable(c.Schema, c.Table, firesTable, requestsTable, auditTable, runningIdx, pendingIdx); ne != nil {
		return &ConfigError{Field: ne.Field, Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
	}
	switch {
	case c.Partitions < 1 || c.Partitions > ownership.MaxPartitions:
		return &ConfigError{Field: "Partitions", Reason: strconv.Itoa(c.Partitions) + " outside [1, " + strconv.Itoa(ownership.MaxPartitions) + "]"}
	case c.PollInterval < 0:
		return &ConfigError{Field: "PollInterval", Reason: "negative"}
	case c.Retry.Base < 0 || c.Retry.Cap < c.Retry.Base:
		return &ConfigError{Field: "Retry", Reason: "need 0 <= Base <= Cap"}
	case c.DrainTimeout < 0:
		return &ConfigError{Field: "DrainTimeout", Reason: "negative"}
	}
	return nil
}
