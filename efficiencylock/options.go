package efficiencylock

import (
	"log/slog"

	"github.com/coordkit/coordkit/coord"
	"go.opentelemetry.io/otel/metric"
)

// DefaultTenant is the tenant of a Locker whose Options leave Tenant empty.
const DefaultTenant = "default"

// Options configure a Locker. A nil *Options takes every default.
type Options struct {
	// Tenant owns the keys: locks live at /tenants/{Tenant}/locks/{name}. It must
	// be a valid coord name (no '/', no whitespace, at most 64 bytes).
	// Default: DefaultTenant ("default").
	Tenant string

	// AutoRefresh, when true, makes every acquired Lock refresh itself every ttl/3
	// (with the ttl it was acquired with) until Release or loss; Lock.Context is
	// cancelled the moment a refresh fails or finds the lock gone. LockOpts can
	// override it per acquisition. Each auto-refreshed Lock runs one goroutine
	// until Release or loss: always Release it. Default: false (the holder
	// refreshes, or the work fits in the ttl).
	AutoRefresh bool

	// Retry is the strategy Acquire uses when it is given a nil RetryStrategy.
	// Default: DefaultRetry() (full jitter, 10 ms to 500 ms, until the context ends).
	Retry RetryStrategy

	// MeterProvider receives efficiencylock.acquisitions, .attempts,
	// .refresh_failures and .lost, each with the declared reason as attribute
	// efficiencylock.reason. Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Logger receives lock losses (Warn) and acquisitions and releases (Debug),
	// with the declared reason. Default: slog.Default().
	Logger *slog.Logger
}

// LockOpts are per-acquisition options; a nil *LockOpts takes the Locker's.
type LockOpts struct {
	// AutoRefresh overrides Options.AutoRefresh for this acquisition when non-nil.
	AutoRefresh *bool
}

// withDefaults validates the options and returns a copy with defaults filled in.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if _, err := coord.Prefix(c.Tenant, coord.KindLocks); err != nil {
		return c, err
	}
	if c.Retry == nil {
		c.Retry = DefaultRetry()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
