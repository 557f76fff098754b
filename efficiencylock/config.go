package efficiencylock

import (
	"cmp"
	"log/slog"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// DefaultTenant is the tenant of a Locker whose Config leaves Tenant empty.
const DefaultTenant = "default"

// Config configures a Locker. The zero value is valid: every field states its
// default.
type Config struct {
	// Tenant owns the keys: locks live at /tenants/{Tenant}/locks/{name}. It must
	// be a valid coord name (no '/', no whitespace, at most 64 bytes).
	// Default DefaultTenant ("default").
	Tenant string

	// AutoRefresh, when true, makes every acquired Lock refresh itself every ttl/3
	// (with the ttl it was acquired with) until Release or loss; Lock.Context is
	// cancelled the moment a refresh fails or finds the lock gone. LockOpts can
	// override it per acquisition. Each auto-refreshed Lock runs one goroutine
	// until Release or loss: always Release it. Default false (the holder
	// refreshes, or the work fits in the ttl).
	AutoRefresh bool

	// Retry is the strategy Acquire uses when its LockOpts name none. Default
	// DefaultRetry(): full jitter from DefaultRetryBase to DefaultRetryCap, until
	// the context ends.
	Retry RetryStrategy

	// MeterProvider receives coordkit.efficiencylock.acquisitions, .attempts,
	// .refresh_failures and .lost, each with the declared reason as attribute
	// coordkit.efficiencylock.reason. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// Logger receives lock losses (Warn) and acquisitions and releases (Debug),
	// with the declared reason. Default slog.Default().
	Logger *slog.Logger
}

// LockOpts are per-acquisition options; a nil *LockOpts takes the Locker's Config.
type LockOpts struct {
	// AutoRefresh overrides Config.AutoRefresh for this acquisition when non-nil.
	AutoRefresh *bool
	// Retry overrides Config.Retry for Acquire when non-nil (TryAcquire makes one
	// attempt whatever it says).
	Retry RetryStrategy
}

func (c Config) withDefaults() Config {
	c.Tenant = cmp.Or(c.Tenant, DefaultTenant)
	c.Retry = cmp.Or(c.Retry, DefaultRetry())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if err := coord.ValidateName("Tenant", c.Tenant, coord.MaxTenantLen); err != nil {
		ne := err.(*coord.NameError) // ValidateName returns nothing else
		return &ConfigError{Field: "Tenant", Reason: strconv.Quote(ne.Value) + ": " + ne.Reason, Err: ne}
	}
	return nil
}
