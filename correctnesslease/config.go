package correctnesslease

import (
	"cmp"
	"log/slog"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

// Defaults and bounds of Config.
const (
	// DefaultTTL is RFC-COORD-001 MUST 3's default: long enough that a GC pause or
	// a slow disk does not cost leadership, short enough that a dead holder is
	// replaced within seconds.
	DefaultTTL = 15 * time.Second
	// MinTTL and MaxTTL bound Config.TTL. Below 2 s etcd itself raises the TTL
	// (its minimum is 1.5 election timeouts); above 60 s a dead holder blocks
	// its role for longer than any caller should accept.
	MinTTL = 2 * time.Second
	MaxTTL = 60 * time.Second
	// DefaultMaxLeaseLabels is how many distinct lease names a Session reports
	// in the coordkit.lease metric attribute before it reports "other".
	DefaultMaxLeaseLabels = 100
)

// Config configures a Session. The zero value is invalid only because Tenant is
// required; every other field has a default.
type Config struct {
	// Tenant owns the keys: /tenants/{Tenant}/elections/{name}/… for leases and
	// /tenants/{Tenant}/members/… for the session key. Required; validated with
	// coord.ValidateName.
	Tenant string

	// TTL of the etcd lease. Default DefaultTTL (15 s); must be in
	// [MinTTL, MaxTTL]. etcd grants whole seconds, so a fractional TTL is rounded
	// up on the server (the local step-down deadline uses the exact TTL: safe).
	// Keepalives are sent every TTL/3; the session steps down when none has
	// succeeded for 2/3 TTL.
	TTL time.Duration

	// KeepaliveTimeout bounds each keepalive RPC. Default TTL/6. Must be below
	// TTL/3, or NewSession fails: a keepalive that may take longer than the
	// renewal interval leaves no time for a retry before the step-down deadline.
	KeepaliveTimeout time.Duration

	// Clock measures renewals and deadlines. Default coord.SystemClock(); it must
	// be monotonic.
	Clock coord.Clock

	// Logger receives step-downs and keepalive failures. Default slog.Default().
	Logger *slog.Logger

	// MeterProvider for the coordkit.correctnesslease.* metrics. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// TracerProvider for session, acquire and release spans. Default
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MaxLeaseLabels bounds the distinct values of the coordkit.lease attribute on
	// this session's metrics: the first MaxLeaseLabels lease names get their own
	// value, later ones are reported as "other" (logs and spans always carry the
	// full name). Default DefaultMaxLeaseLabels; must not be negative.
	MaxLeaseLabels int

	// PrivateWatches gives the session a watch plane of its own (its own
	// upstream etcd watch of the tenant's elections, closed by Close) instead of
	// the client's shared one. Default false: every lease and waiter of the
	// process follows its key through one shared watch per tenant.
	PrivateWatches bool

	// keepAliveOnce replaces cli.KeepAliveOnce in tests of the renewal logic.
	keepAliveOnce keepAliveFunc
	// backoffRand replaces the random draw of the retry backoffs (a read of the
	// queue or of the lease's key, a fence or a cleanup retried) in tests of their
	// schedule; nil draws from math/rand as usual.
	backoffRand func(n int64) int64
}

func (c Config) withDefaults() Config {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = c.TTL / 6
	}
	c.Clock = coord.OrSystem(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	c.MaxLeaseLabels = cmp.Or(c.MaxLeaseLabels, DefaultMaxLeaseLabels)
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError; an
// invalid Tenant unwraps to the *coord.NameError.
func (c Config) validate() error {
	if err := coord.ValidateName("Tenant", c.Tenant, coord.MaxTenantLen); err != nil {
		ne := err.(*coord.NameError) // ValidateName returns nothing else
		return &ConfigError{Field: "Tenant", Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
	}
	switch {
	case c.TTL < MinTTL || c.TTL > MaxTTL:
		return &ConfigError{Field: "TTL", Reason: c.TTL.String() + " outside [" + MinTTL.String() + ", " + MaxTTL.String() + "]"}
	case c.KeepaliveTimeout < 0:
		return &ConfigError{Field: "KeepaliveTimeout", Reason: "negative"}
	case c.KeepaliveTimeout >= c.TTL/3:
		return &ConfigError{Field: "KeepaliveTimeout", Reason: c.KeepaliveTimeout.String() + " is not below TTL/3 = " + (c.TTL / 3).String()}
	case c.MaxLeaseLabels < 0:
		return &ConfigError{Field: "MaxLeaseLabels", Reason: "negative"}
	}
	return nil
}

// renewInterval is how often a healthy session sends a keepalive.
func (c Config) renewInterval() time.Duration { return c.TTL / 3 }

// stepDownAfter is how long after the send time of the last successful
// keepalive the session gives up its authority.
func (c Config) stepDownAfter() time.Duration { return c.TTL * 2 / 3 }

// retryInterval is the pause before the next keepalive after a failed one.
func (c Config) retryInterval() time.Duration { return c.TTL / 12 }
