package outbox

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
)

// Defaults of Config.
const (
	DefaultTable           = "coord_outbox"
	DefaultMaxPayloadBytes = 256 << 10
	DefaultBatchSize       = 500
	DefaultPollInterval    = time.Second
	DefaultMaxAttempts     = 10
	DefaultPublishTimeout  = 30 * time.Second
	DefaultRetention       = time.Hour
	DefaultPruneInterval   = time.Minute
	DefaultPruneBatch      = 5000
	DefaultShutdownTimeout = 10 * time.Second
)

// Names derived from Config.Table (and, for its index, Config.DeadLetterTable).
var (
	deadLetterTable = pgschema.Derived{Suffix: "_parked", What: "dead-letter table"}
	readyChannel    = pgschema.Derived{Suffix: "_ready", What: "NOTIFY channel"}
	pendingIdx      = pgschema.Derived{Suffix: "_pending", What: "index"}
	keyIdx          = pgschema.Derived{Suffix: "_key", What: "index"}
	retryIdx        = pgschema.Derived{Suffix: "_retry", What: "index"}
	publishedIdx    = pgschema.Derived{Suffix: "_published", What: "index"}
	seqIdx          = pgschema.Derived{Suffix: "_seq", What: "index"}
	keyTimeIdx      = pgschema.Derived{Suffix: "_kt", What: "index (key, parking time)"}
	// The dead-letter table's own indexes; derived from Table too when
	// DeadLetterTable is left to its default.
	deadKeyIdx = pgschema.Derived{Suffix: "_parked_key", What: "dead-letter index"}
	deadSeqIdx = pgschema.Derived{Suffix: "_parked_seq", What: "dead-letter index"}
	deadKTIdx  = pgschema.Derived{Suffix: "_parked_kt", What: "dead-letter index"}
)

// Bounds of Config.
const (
	maxBatchSize = 10000
	minPoll      = time.Millisecond
)

// Config configures an Outbox and its relays. The zero value is usable: every field
// states its default.
type Config struct {
	// Schema holds the outbox and dead-letter tables. Default "": the connection's
	// search_path.
	Schema string
	// Table is the outbox table. Default DefaultTable. Any printable UTF-8 without
	// '.' of at most 63 bytes, together with the names derived from it (indexes
	// Table + "_pending", "_key", "_retry", "_published"; unless set explicitly,
	// the dead-letter table Table + "_parked" with its index Table + "_parked_key",
	// and the channel Table + "_ready"); always quoted.
	Table string
	// DeadLetterTable holds parked events, in Schema. Same rule, with its index
	// DeadLetterTable + "_key". Default Table + "_parked".
	DeadLetterTable string
	// Channel is the LISTEN/NOTIFY channel EnqueueTx notifies. Same rule. Default
	// Table + "_ready". Channels are per database, not per schema: two outboxes of
	// one table name in two schemas share one (a relay then wakes for the other's
	// events too, and finds nothing: harmless).
	Channel string
	// DisableNotify stops EnqueueTx from issuing pg_notify (relays then rely on
	// polling only). Default false: NOTIFY is sent, in the enqueuing transaction.
	DisableNotify bool
	// MaxPayloadBytes bounds a payload. Default DefaultMaxPayloadBytes (256 KiB);
	// negative: no limit.
	MaxPayloadBytes int

	// BatchSize is how many events a relay claims and publishes per transaction,
	// in [1, 10000]. Default DefaultBatchSize (500).
	BatchSize int
	// PollInterval is the polling fallback when no NOTIFY arrives (poolers in
	// transaction mode drop them); at least 1 ms. Default DefaultPollInterval (1 s).
	PollInterval time.Duration
	// MaxAttempts is how many failed publishes park an event. Default
	// DefaultMaxAttempts (10).
	MaxAttempts int
	// Backoff schedules retries of a failed event (full jitter). Default
	// coord.Backoff{}: coord.DefaultBackoffBase (100 ms) to coord.DefaultBackoffCap
	// (30 s).
	Backoff coord.Backoff
	// PublishTimeout bounds one Publish call. Default DefaultPublishTimeout (30 s).
	PublishTimeout time.Duration
	// DeleteOnPublish deletes rows once published instead of setting
	// published_at. Default false (mark, then prune after Retention).
	DeleteOnPublish bool
	// Retention is how long published rows are kept before pruning (mark mode).
	// Default DefaultRetention (1 h).
	Retention time.Duration
	// PruneInterval is how often a relay prunes. Default DefaultPruneInterval
	// (1 min).
	PruneInterval time.Duration
	// PruneBatch bounds the rows one prune statement deletes. Default
	// DefaultPruneBatch (5000).
	PruneBatch int
	// ShutdownTimeout bounds the finishing of the in-flight batch after Run's
	// context is cancelled. Default DefaultShutdownTimeout (10 s).
	ShutdownTimeout time.Duration

	// Logger receives relay events. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider provides the metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator injects the enqueuing context's trace context into the headers.
	// Default otel.GetTextMapPropagator().
	Propagator propagation.TextMapPropagator
}

func (c Config) withDefaults() Config {
	c.Table = cmp.Or(c.Table, DefaultTable)
	c.DeadLetterTable = cmp.Or(c.DeadLetterTable, c.Table+deadLetterTable.Suffix)
	c.Channel = cmp.Or(c.Channel, c.Table+readyChannel.Suffix)
	c.MaxPayloadBytes = cmp.Or(c.MaxPayloadBytes, DefaultMaxPayloadBytes)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DefaultMaxAttempts)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, DefaultPublishTimeout)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.PruneInterval = cmp.Or(c.PruneInterval, DefaultPruneInterval)
	c.PruneBatch = cmp.Or(c.PruneBatch, DefaultPruneBatch)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.Propagator = cmp.Or(c.Propagator, otel.GetTextMapPropagator())
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError. A name
// derived from Table is checked under Table — the field the caller set — so a
// long Table is reported as such, not as a dead-letter table or channel the
// caller never named.
func (c Config) validate() error {
	fromTable := []pgschema.Derived{pendingIdx, keyIdx, retryIdx, publishedIdx}
	if c.DeadLetterTable == c.Table+deadLetterTable.Suffix {
		fromTable = append(fromTable, deadLetterTable, deadKeyIdx, deadSeqIdx, deadKTIdx)
	} else if ne := pgschema.CheckIdent("DeadLetterTable", c.DeadLetterTable, keyIdx, seqIdx, keyTimeIdx); ne != nil {
		return nameError(ne)
	}
	if c.Channel == c.Table+readyChannel.Suffix {
		fromTable = append(fromTable, readyChannel)
	} else if ne := pgschema.CheckIdent("Channel", c.Channel); ne != nil {
		return nameError(ne)
	}
	if ne := pgschema.CheckTable(c.Schema, c.Table, fromTable...); ne != nil {
		return nameError(ne)
	}
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	switch {
	case c.Table == c.DeadLetterTable:
		return bad("DeadLetterTable", "must differ from Table")
	case c.BatchSize < 1 || c.BatchSize > maxBatchSize:
		return bad("BatchSize", fmt.Sprintf("%d outside [1, %d]", c.BatchSize, maxBatchSize))
	case c.PollInterval < minPoll:
		return bad("PollInterval", fmt.Sprintf("%v below %v", c.PollInterval, minPoll))
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "below 1")
	case c.PublishTimeout <= 0:
		return bad("PublishTimeout", "must be positive")
	case c.Retention < 0:
		return bad("Retention", "negative")
	case c.PruneInterval <= 0:
		return bad("PruneInterval", "must be positive")
	case c.ShutdownTimeout <= 0:
		return bad("ShutdownTimeout", "must be positive")
	case c.PruneBatch < 1:
		return bad("PruneBatch", "below 1")
	}
	return nil
}
