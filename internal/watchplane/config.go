package watchplane

import (
	"cmp"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
)

// Defaults of Config and Spec.
const (
	// DefaultRequestTimeout bounds each list, probe read and watch open.
	DefaultRequestTimeout = 2 * time.Second
	// DefaultHistory is how many recent events a root keeps for subscribers
	// that resume from a revision (etcd's own cache keeps 2048).
	DefaultHistory = 4096
	// DefaultBuffer is how many events may wait for one subscriber before it
	// is told to resync instead.
	DefaultBuffer = 1024
	// DefaultIdleTimeout is how long a root with no subscription keeps its
	// watch, so a subscriber that comes and goes does not re-list each time.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultProbeInterval and DefaultResetAfter apply to a root none of whose
	// subscribers asks for more: a silent stream is still found within about a
	// minute, at the cost of one read per plane every 10 s.
	DefaultProbeInterval = 10 * time.Second
	DefaultResetAfter    = time.Minute
)

// Config configures a Plane. Every field has a default.
type Config struct {
	// Clock drives probes, backoff, idle roots and confirmations. Default
	// coord.SystemClock(). Request timeouts are real time (they bound I/O).
	Clock coord.Clock
	// RequestTimeout bounds each list, probe and watch open. Default
	// DefaultRequestTimeout. After one ran out of time the next of its kind
	// gets twice as long, up to 8× (see stretch): an etcd slower than the
	// bound is slow, not gone, and is still listed and watched.
	RequestTimeout time.Duration
	// History is the number of events each root keeps for resumes. Default
	// DefaultHistory.
	History int
	// Buffer is the number of events queued for one subscriber before it is
	// told to resync. Default DefaultBuffer.
	Buffer int
	// IdleTimeout is how long a root outlives its last subscriber. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Quotas charges every upstream watch (MaxWatches), watch open and re-list
	// (the reconnect budget) to the tenant of its root. Default: a Quotas of the
	// plane's own with coord's default limits.
	Quotas *coord.Quotas
	// Logger receives opens, failures, re-lists and resyncs. Default
	// slog.Default().
	Logger *slog.Logger
	// MeterProvider for the coordkit.watchplane.* metrics. Default
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

func (c Config) withDefaults() Config {
	c.Clock = coord.OrSystem(c.Clock)
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.History <= 0 {
		c.History = DefaultHistory
	}
	if c.Buffer <= 0 {
		c.Buffer = DefaultBuffer
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.Quotas == nil {
		c.Quotas = coord.NewQuotas(coord.QuotaConfig{Clock: c.Clock})
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

// Spec says what a subscriber watches and what it asks of its root.
type Spec struct {
	// Key is the watched key, or with Prefix the watched prefix. Required.
	Key    string
	Prefix bool
	// Root is the prefix of the upstream watch; Key must lie under it.
	// Default RootOf(Key).
	Root string
	// From is the first revision whose events the subscriber wants. 0 starts
	// with a resync: the current state of the range.
	From int64
	// ProbeInterval asks the plane to confirm the root current at least this
	// often (Sub.Confirmed). 0: the subscriber needs no more than the plane's
	// DefaultProbeInterval.
	ProbeInterval time.Duration
	// ResetAfter asks the plane to re-open the root's watch once the root has
	// been unconfirmed this long (a stream presumed hung). 0: DefaultResetAfter.
	ResetAfter time.Duration
	// RequestTimeout asks the plane to bound the root's lists, probe reads and
	// watch opens by at most this. 0: Config.RequestTimeout.
	RequestTimeout time.Duration
	// Backoff is the reconnect schedule the subscriber asks for. The root
	// follows the live subscriber whose Backoff has the smallest Cap. Zero:
	// coord's defaults.
	Backoff coord.Backoff
}

// One rule for what subscribers ask of their shared root: the root follows the
// most demanding live subscriber — the smallest ProbeInterval, ResetAfter,
// RequestTimeout and Backoff cap.

// RootOf returns the root prefix of a key: /tenants/{t}/{kind}/ for a key in the
// tenant layout (its tenant's kind: every key of the kind shares one upstream
// watch), else the key itself. It does not validate.
func RootOf(key string) string {
	if _, ok := coord.TenantOf(key); !ok {
		return key
	}
	rest := key[len("/tenants/"):]
	i := strings.IndexByte(rest, '/')
	kind, _, found := strings.Cut(rest[i+1:], "/")
	if !found || kind == "" {
		return key
	}
	return key[:len("/tenants/")+i+1+len(kind)+1]
}

// maxStretch caps how far consecutive timeouts stretch a request's bound: 2^3 = 8×.
const maxStretch = 3

// stretch is the bound of a request after slow consecutive ones of its kind
// ran out of time with etcd connected (slowNotGone): timeout doubled for each,
// up to 8×. Without it an etcd answering slower than the bound would time out
// every attempt alike and never be listed. An etcd that is gone stretches
// nothing: its requests wait for the connection and time out at the bound, and
// the next attempt comes as soon after its return.
func stretch(timeout time.Duration, slow int) time.Duration {
	return timeout << min(slow, maxStretch)
}
