package idempotency

import (
	"cmp"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/internal/pgschema"
)

// MinRetention is the shortest retention Config accepts: RFC-COORD-001 keeps keys at
// least 24 hours, so a client retrying after a day-long outage is still deduplicated.
const MinRetention = 24 * time.Hour

// Defaults of Config.
const (
	DefaultTable            = "coord_idempotency_keys"
	DefaultRetention        = MinRetention
	DefaultWaitTimeout      = 2 * time.Second
	DefaultLockTimeout      = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	DefaultMaxRequestBytes  = 1 << 20
)

// Bounds of Config.
const (
	minWaitTimeout = time.Millisecond
	minLockTimeout = 100 * time.Millisecond
)

// Config configures a Store. The zero value is valid: every field states its default.
type Config struct {
	// Schema holds the key table. Default "": the connection's search_path.
	Schema string
	// Table is the key table. Default DefaultTable. Any printable UTF-8 without '.'
	// of at most 63 bytes, together with its derived index names (Table +
	// "_created_idx", "_abandoned_idx"); always quoted.
	Table string
	// Retention is how long completed keys are kept before the Pruner deletes them.
	// Default DefaultRetention, and at least MinRetention (24h).
	Retention time.Duration
	// WaitTimeout bounds how long a concurrent duplicate waits for the first
	// request's uncommitted transaction (Postgres lock_timeout) before it gets an
	// *InFlightError. Default DefaultWaitTimeout (2s): longer than a typical effect
	// transaction, so most duplicates get the replay instead of a 409, and short
	// enough for an HTTP client. At least 1ms.
	WaitTimeout time.Duration
	// LockTimeout is how long a phased request owns its key after each recovery
	// point; after it expires a retry or the Completer may take the key over.
	// Default DefaultLockTimeout (30s); at least 100ms. Set it above the slowest
	// phase (an external call's timeout).
	LockTimeout time.Duration
	// MaxResponseBytes bounds the stored response (headers + body). Default
	// DefaultMaxResponseBytes (1 MiB).
	MaxResponseBytes int
	// MaxRequestBytes bounds the request stored for a phased operation and the body
	// the HTTP middleware reads. Default DefaultMaxRequestBytes (1 MiB).
	MaxRequestBytes int
	// MeterProvider provides the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider provides one span per Do, DoTx and Run, with the outcome as
	// attribute coordkit.outcome. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Logger receives warnings (completer and pruner failures). Default slog.Default().
	Logger *slog.Logger
}

// Derived names of the key table.
var (
	createdIdx   = pgschema.Derived{Suffix: "_created_idx", What: "index"}
	abandonedIdx = pgschema.Derived{Suffix: "_abandoned_idx", What: "index"}
)

func (c Config) withDefaults() Config {
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.WaitTimeout = cmp.Or(c.WaitTimeout, DefaultWaitTimeout)
	c.LockTimeout = cmp.Or(c.LockTimeout, DefaultLockTimeout)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, DefaultMaxRequestBytes)
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if ne := pgschema.CheckTable(c.Schema, c.Table, createdIdx, abandonedIdx); ne != nil {
		return nameError(ne)
	}
	switch {
	case c.Retention < MinRetention:
		return &ConfigError{Field: "Retention", Reason: c.Retention.String() + " is shorter than the minimum " + MinRetention.String()}
	case c.WaitTimeout < minWaitTimeout:
		return &ConfigError{Field: "WaitTimeout", Reason: c.WaitTimeout.String() + " is below " + minWaitTimeout.String()}
	case c.LockTimeout < minLockTimeout:
		return &ConfigError{Field: "LockTimeout", Reason: c.LockTimeout.String() + " is below " + minLockTimeout.String()}
	case c.MaxResponseBytes < 0:
		return &ConfigError{Field: "MaxResponseBytes", Reason: "negative"}
	case c.MaxRequestBytes < 0:
		return &ConfigError{Field: "MaxRequestBytes", Reason: "negative"}
	}
	return nil
}
