package idempotency

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// MinRetention is the shortest retention Config accepts: RFC-COORD-001 keeps keys at
// least 24 hours, so a client retrying after a day-long outage is still deduplicated.
const MinRetention = 24 * time.Hour

// Config configures a Store. The zero value is valid: every field states its default.
type Config struct {
	// Table is the key table, "name" or "schema.name"; each part matches
	// [A-Za-z_][A-Za-z0-9_]{0,47} and is always quoted with pgx.Identifier.
	// Default "coord_idempotency_keys".
	Table string
	// Retention is how long completed keys are kept before the Pruner deletes them.
	// Default and minimum 24h (MinRetention); shorter values are refused.
	Retention time.Duration
	// WaitTimeout bounds how long a concurrent duplicate waits for the first
	// request's uncommitted transaction (Postgres lock_timeout) before it gets an
	// *InFlightError. Default 2s: longer than a typical effect transaction, so most
	// duplicates get the replay instead of a 409, and short enough for an HTTP client.
	WaitTimeout time.Duration
	// LockTimeout is how long a phased request owns its key after each recovery
	// point; after it expires a retry or the Completer may take the key over.
	// Default 30s. Set it above the slowest phase (an external call's timeout).
	LockTimeout time.Duration
	// MaxResponseBytes bounds the stored response (headers + body). Default 1 MiB.
	MaxResponseBytes int
	// MaxRequestBytes bounds the request stored for a phased operation and the body
	// the HTTP middleware reads. Default 1 MiB.
	MaxRequestBytes int
	// MeterProvider provides the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider provides one span per Do, DoTx and Run, with the outcome as
	// attribute coord.outcome. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Logger receives warnings (completer and pruner failures). Default slog.Default().
	Logger *slog.Logger
}

const defaultTable = "coord_idempotency_keys"

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = defaultTable
	}
	if c.Retention == 0 {
		c.Retention = MinRetention
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = 2 * time.Second
	}
	if c.LockTimeout == 0 {
		c.LockTimeout = 30 * time.Second
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = 1 << 20
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	return c
}

// validate checks a Config after defaults were applied. Errors match ErrInvalidConfig.
func (c Config) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if _, err := tableIdent(c.Table); err != nil {
		return err
	}
	switch {
	case c.Retention < MinRetention:
		return bad("Retention %s is shorter than the minimum %s", c.Retention, MinRetention)
	case c.WaitTimeout < time.Millisecond:
		return bad("WaitTimeout %s must be at least 1ms", c.WaitTimeout)
	case c.LockTimeout < 100*time.Millisecond:
		return bad("LockTimeout %s must be at least 100ms", c.LockTimeout)
	case c.MaxResponseBytes < 0 || c.MaxRequestBytes < 0:
		return bad("negative size limit")
	}
	return nil
}

// tableIdent parses "name" or "schema.name" into a pgx.Identifier.
func tableIdent(table string) (pgx.Identifier, error) {
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: table %q: at most schema.name", ErrInvalidConfig, pgtext.Clean(table, 64))
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return nil, fmt.Errorf("%w: table %q: each part must match %s", ErrInvalidConfig, pgtext.Clean(table, 64), identRE)
		}
	}
	return pgx.Identifier(parts), nil
}
