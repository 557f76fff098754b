package outbox

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
)

// Config configures an Outbox and its relays. The zero value is usable: every field
// states its default.
type Config struct {
	// Table is the outbox table, optionally schema-qualified ("events.outbox").
	// Each part: a letter or underscore, then letters, digits or underscores, at most
	// 40 bytes. Always quoted. Default "coord_outbox".
	Table string
	// DeadLetterTable holds parked events. Same rules. Default Table + "_parked".
	DeadLetterTable string
	// Channel is the LISTEN/NOTIFY channel EnqueueTx notifies. Default Table's name
	// + "_ready" (schema dots replaced by underscores).
	Channel string
	// DisableNotify stops EnqueueTx from issuing pg_notify (relays then rely on
	// polling only). Default false: NOTIFY is sent, in the enqueuing transaction.
	DisableNotify bool
	// MaxPayloadBytes bounds a payload. Default 256 KiB; negative: no limit.
	MaxPayloadBytes int

	// BatchSize is how many events a relay claims and publishes per transaction.
	// Default 500.
	BatchSize int
	// PollInterval is the polling fallback when no NOTIFY arrives (poolers in
	// transaction mode drop them). Default 1 s.
	PollInterval time.Duration
	// MaxAttempts is how many failed publishes park an event. Default 10.
	MaxAttempts int
	// Backoff schedules retries of a failed event (full jitter). Default
	// coord.Backoff{Base: 100 ms, Cap: 30 s}.
	Backoff coord.Backoff
	// PublishTimeout bounds one Publish call. Default 30 s.
	PublishTimeout time.Duration
	// DeleteOnPublish deletes rows once published instead of setting
	// published_at. Default false (mark, then prune after Retention).
	DeleteOnPublish bool
	// Retention is how long published rows are kept before pruning (mark mode).
	// Default 1 h.
	Retention time.Duration
	// PruneInterval is how often a relay prunes. Default 1 min.
	PruneInterval time.Duration
	// PruneBatch bounds the rows one prune statement deletes. Default 5000.
	PruneBatch int
	// ShutdownTimeout bounds the finishing of the in-flight batch after Run's
	// context is cancelled. Default 10 s.
	ShutdownTimeout time.Duration

	// Logger receives relay events. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider provides the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator injects the enqueuing context's trace context into the headers.
	// Default otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

var (
	namePart    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,39}$`)
	channelName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// tableIdent validates a possibly schema-qualified name and returns it as a
// pgx.Identifier.
func tableIdent(field, name string) (pgx.Identifier, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, &ConfigError{Field: field, Reason: fmt.Sprintf("%q: at most schema.table", pgtext.Clean(name, quoted))}
	}
	for _, p := range parts {
		if !namePart.MatchString(p) {
			return nil, &ConfigError{Field: field, Reason: fmt.Sprintf("%q: each part must match %s", pgtext.Clean(name, quoted), namePart)}
		}
	}
	return pgx.Identifier(parts), nil
}

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = "coord_outbox"
	}
	if c.DeadLetterTable == "" {
		c.DeadLetterTable = c.Table + "_parked"
	}
	if c.Channel == "" {
		c.Channel = strings.ReplaceAll(c.Table, ".", "_") + "_ready"
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = 256 << 10
	}
	if c.BatchSize == 0 {
		c.BatchSize = 500
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 10
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = 30 * time.Second
	}
	if c.Retention == 0 {
		c.Retention = time.Hour
	}
	if c.PruneInterval == 0 {
		c.PruneInterval = time.Minute
	}
	if c.PruneBatch == 0 {
		c.PruneBatch = 5000
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	return c
}

// validate checks a defaulted Config.
func (c Config) validate() error {
	if _, err := tableIdent("Table", c.Table); err != nil {
		return err
	}
	if _, err := tableIdent("DeadLetterTable", c.DeadLetterTable); err != nil {
		return err
	}
	if c.Table == c.DeadLetterTable {
		return &ConfigError{Field: "DeadLetterTable", Reason: "must differ from Table"}
	}
	if !channelName.MatchString(c.Channel) {
		return &ConfigError{Field: "Channel", Reason: fmt.Sprintf("%q: letters, digits, underscores", pgtext.Clean(c.Channel, quoted))}
	}
	switch {
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return &ConfigError{Field: "BatchSize", Reason: "must be in [1, 10000]"}
	case c.PollInterval < time.Millisecond:
		return &ConfigError{Field: "PollInterval", Reason: "must be ≥ 1 ms"}
	case c.MaxAttempts < 1:
		return &ConfigError{Field: "MaxAttempts", Reason: "must be ≥ 1"}
	case c.PublishTimeout <= 0, c.Retention < 0, c.PruneInterval <= 0, c.ShutdownTimeout <= 0:
		return &ConfigError{Field: "durations", Reason: "must be positive"}
	case c.PruneBatch < 1:
		return &ConfigError{Field: "PruneBatch", Reason: "must be ≥ 1"}
	}
	return nil
}
