package saga

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
)

// Defaults of Config.
const (
	DefaultTable                = "coord_sagas"
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
	// Schema holds the saga table. Default "": the connection's search_path.
	Schema string
	// Table is the saga table. Default DefaultTable. Any printable UTF-8 without
	// '.' of at most 63 bytes, together with its derived index, constraint and
	// channel names (Table + "_due_idx", "_state_idx", "_no_comp_after_pivot",
	// "_due"); always quoted. The LISTEN/NOTIFY channel is Table + "_due".
	Table string
	// Owner identifies this process in claim_owner; at most 200 bytes. Default
	// "<hostname>-<pid>-<random>".
	Owner string
	// Concurrency is how many sagas one runner drives at once, in [1, 10000].
	// Default DefaultConcurrency (16). Size the pool for it: each in-flight saga
	// holds one of the pool's connections while it writes its step (plus what its
	// step's own code takes from the same pool); Run's LISTEN connection is taken
	// out of the pool, so it counts against the server's max_connections only.
	// NewClient logs a warning when the pool's MaxConns is below Concurrency
	// (pgxpool's default is max(4, NumCPU)). See docs/pool-sizing.md.
	Concurrency int
	// ClaimTTL is how long a claim lasts without a write; each committed step
	// extends it. It must exceed the longest step: the step's context is cancelled
	// shortly before the claim expires, and a runner whose claim was taken over
	// cannot write (claim_version fence). Default DefaultClaimTTL (30 s); at least
	// 100 ms.
	ClaimTTL time.Duration
	// PollInterval is the polling fallback when no NOTIFY arrives. Default
	// DefaultPollInterval (1 s); at least 1 ms.
	PollInterval time.Duration
	// Backoff schedules retries of failed steps and compensations (full jitter).
	// Default coord.Backoff{} (base 100 ms, cap 30 s).
	Backoff coord.Backoff
	// CompensationAttempts is how many times a compensation may fail before the
	// saga pages and goes to needs_human. Default DefaultCompensationAttempts (3,
	// RFC MUST 5).
	CompensationAttempts int
	// StuckAfter is how long after its pivot a saga may keep retrying forward
	// before it pages (once, reason PageStuckAfterPivot). Default DefaultStuckAfter
	// (1 h).
	StuckAfter time.Duration
	// OnPage is called (from a runner goroutine; keep it short) when a saga needs a
	// human: a compensation failed CompensationAttempts times, or a saga past its
	// pivot has retried for StuckAfter. Default nil: pages are only logged (Error)
	// and counted.
	OnPage func(ctx context.Context, p Page)
	// MaxDataBytes bounds the JSON of saga data and of each step output. Default
	// DefaultMaxDataBytes (1 MiB).
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

// defaultOwner is Config.Owner's default: "<hostname>-<pid>-<random>", unique
// per Client.
func defaultOwner() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
}

func (c Config) withDefaults() Config {
	c.Table = cmp.Or(c.Table, DefaultTable)
	if c.Owner == "" {
		c.Owner = defaultOwner()
	}
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.ClaimTTL = cmp.Or(c.ClaimTTL, DefaultClaimTTL)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.CompensationAttempts = cmp.Or(c.CompensationAttempts, DefaultCompensationAttempts)
	c.StuckAfter = cmp.Or(c.StuckAfter, DefaultStuckAfter)
	c.MaxDataBytes = cmp.Or(c.MaxDataBytes, DefaultMaxDataBytes)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	return c
}

// Derived names of the saga table.
var (
	dueIdx      = pgschema.Derived{Suffix: "_due_idx", What: "index"}
	stateIdx    = pgschema.Derived{Suffix: "_state_idx", What: "index"}
	listIdx     = pgschema.Derived{Suffix: "_list_idx", What: "index"}
	stateList   = pgschema.Derived{Suffix: "_state_list_idx", What: "index"}
	noCompCheck = pgschema.Derived{Suffix: "_no_comp_after_pivot", What: "constraint"}
	dueChannel  = pgschema.Derived{Suffix: "_due", What: "NOTIFY channel"}
)

// Bounds of Config.
const (
	maxConcurrency = 10000
	minClaimTTL    = 100 * time.Millisecond
	minPoll        = time.Millisecond
	maxOwnerBytes  = 200
)

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config) validate() error {
	if ne := pgschema.CheckTable(c.Schema, c.Table, dueIdx, stateIdx, listIdx, stateList, noCompCheck, dueChannel); ne != nil {
		return nameError(ne)
	}
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > maxConcurrency:
		return bad("Concurrency", "%d outside [1, %d]", c.Concurrency, maxConcurrency)
	case c.ClaimTTL < minClaimTTL:
		return bad("ClaimTTL", "%v below %v", c.ClaimTTL, minClaimTTL)
	case c.PollInterval < minPoll:
		return bad("PollInterval", "%v below %v", c.PollInterval, minPoll)
	case c.CompensationAttempts < 1:
		return bad("CompensationAttempts", "%d below 1", c.CompensationAttempts)
	case c.StuckAfter < 0:
		return bad("StuckAfter", "%v negative", c.StuckAfter)
	case c.MaxDataBytes < 2:
		return bad("MaxDataBytes", "%d below 2", c.MaxDataBytes)
	case len(c.Owner) > maxOwnerBytes:
		return bad("Owner", "longer than %d bytes", maxOwnerBytes)
	}
	return nil
}
