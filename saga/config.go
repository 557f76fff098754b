package saga

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

// Defaults of Config.
const (
	DefaultConcurrency          = 16
	DefaultClaimTTL             = 30 * time.Second
	DefaultPollInterval         = time.Second
	DefaultCompensationAttempts = 3
	DefaultStuckAfter           = time.Hour
	DefaultMaxDataBytes         = 1 << 20
)

// Config configures a [Client]. The zero value is valid: every field states its
// default.
type Config struct {
	// Table is the saga table (plain identifier, always quoted). Default DefaultTable.
	// The LISTEN/NOTIFY channel is Table + "_due".
	Table string
	// Owner identifies this process in claim_owner. Default "<hostname>-<pid>-<random>".
	Owner string
	// Concurrency is how many sagas one runner drives at once. Default 16. Size
	// the pool for it: each in-flight saga holds a connection during its write,
	// and Run keeps one more for LISTEN.
	Concurrency int
	// ClaimTTL is how long a claim lasts without a write; each committed step
	// extends it. It must exceed the longest step: the step's context is cancelled
	// shortly before the claim expires, and a runner whose claim was taken over
	// cannot write (claim_version fence). Default 30 s.
	ClaimTTL time.Duration
	// PollInterval is the polling fallback when no NOTIFY arrives. Default 1 s.
	PollInterval time.Duration
	// Backoff schedules retries of failed steps and compensations (full jitter).
	// Default coord.Backoff{} (base 100 ms, cap 30 s).
	Backoff coord.Backoff
	// CompensationAttempts is how many times a compensation may fail before the
	// saga pages and goes to needs_human. Default 3 (RFC MUST 5).
	CompensationAttempts int
	// StuckAfter is how long after its pivot a saga may keep retrying forward
	// before it pages (once, reason PageStuckAfterPivot). Default 1 h.
	StuckAfter time.Duration
	// OnPage is called (from a runner goroutine; keep it short) when a saga needs a
	// human: a compensation failed CompensationAttempts times, or a saga past its
	// pivot has retried for StuckAfter. Default nil: pages are only logged (Error)
	// and counted.
	OnPage func(ctx context.Context, p Page)
	// MaxDataBytes bounds the JSON of saga data and of each step output. Default 1 MiB.
	MaxDataBytes int
	// Logger receives the runner's logs. Default slog.Default().
	Logger *slog.Logger
	// MeterProvider provides the saga metrics. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// TracerProvider provides a span per step call. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
}

// PageReason says why a saga paged.
type PageReason string

// The reasons a saga pages.
const (
	// PageCompensationFailed: a compensation failed CompensationAttempts times;
	// the saga is in needs_human.
	PageCompensationFailed PageReason = "compensation_failed"
	// PageStuckAfterPivot: a saga past its pivot has been retrying forward for
	// longer than StuckAfter. It keeps retrying.
	PageStuckAfterPivot PageReason = "stuck_after_pivot"
	// PageCannotDrive: the runner's definition does not match the stored saga (a
	// step index out of range, or a compensation requested at or after the pivot);
	// the saga is in needs_human.
	PageCannotDrive PageReason = "cannot_drive"
)

// Page describes a saga that needs a human.
type Page struct {
	SagaID   string     // the saga
	Type     string     // its definition's name
	Step     string     // the step whose action or compensation keeps failing
	Attempts int        // failed attempts so far
	Reason   PageReason // why it pages
	Err      error      // the last error
}

func (c Config) withDefaults() Config {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		rand.Read(b)
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.ClaimTTL == 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.CompensationAttempts == 0 {
		c.CompensationAttempts = DefaultCompensationAttempts
	}
	if c.StuckAfter == 0 {
		c.StuckAfter = DefaultStuckAfter
	}
	if c.MaxDataBytes == 0 {
		c.MaxDataBytes = DefaultMaxDataBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if err := validateTable("Table", c.Table); err != nil {
		return err
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > 10000:
		return bad("Concurrency %d outside [1, 10000]", c.Concurrency)
	case c.ClaimTTL < 100*time.Millisecond:
		return bad("ClaimTTL %v below 100ms", c.ClaimTTL)
	case c.PollInterval < time.Millisecond:
		return bad("PollInterval %v below 1ms", c.PollInterval)
	case c.CompensationAttempts < 1:
		return bad("CompensationAttempts %d below 1", c.CompensationAttempts)
	case c.StuckAfter < 0:
		return bad("StuckAfter %v negative", c.StuckAfter)
	case c.MaxDataBytes < 2:
		return bad("MaxDataBytes %d below 2", c.MaxDataBytes)
	case len(c.Owner) > 200:
		return bad("Owner longer than 200 bytes")
	}
	return nil
}
