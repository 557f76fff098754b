package failstatic

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgtext"
)

// Defaults of Config.
const (
	DefaultProbeInterval     = time.Second
	DefaultResetAfter        = 10 * time.Second
	DefaultRequestTimeout    = 2 * time.Second
	DefaultInitialTimeout    = 5 * time.Second
	DefaultDiskFallbackAfter = 50 * time.Millisecond
)

// KeyClass is a group of keys that must fail closed once the cache has not been
// confirmed current for MaxStaleness (revocations, kill switches). Keys outside
// every class never fail closed.
type KeyClass struct {
	// Name identifies the class in errors and logs. Required, unique.
	Name string
	// Prefix selects the class's keys: a key belongs to the class when its path
	// relative to Config.Prefix (or the empty string, for Config.Key) starts with
	// Prefix. The first matching class wins. "" matches every key.
	Prefix string
	// MaxStaleness after which reads of the class fail with ErrStale. Required (> 0).
	MaxStaleness time.Duration
}

// Config configures a Cache. Every field states its default.
type Config[T any] struct {
	// Key watches exactly one key. Exactly one of Key and Prefix is required.
	// Keys are taken verbatim (any etcd key); the tenant layout
	// coord.Key(tenant, coord.KindConfig, name) is recommended and, when used,
	// labels the metrics with the tenant.
	Key string
	// Prefix watches every key under it, e.g. coord.Prefix(tenant, coord.KindConfig).
	// A prefix that reaches into /tenants/ must name one whole tenant with its
	// trailing slash (/tenants/{tenant}/…): "/tenants/t1" would also watch tenant
	// t10, "/" or "/tenants/" every tenant. Other prefixes are taken verbatim.
	Prefix string

	// Decode builds T from the full snapshot (keys sorted, possibly empty).
	// Required. An error rejects the snapshot.
	Decode func(kvs []KV) (T, error)
	// Validate checks a decoded T before adoption. Default: accept everything.
	Validate func(T) error

	// StatePath is the file holding the last-known-good snapshot (and
	// StatePath+".confirmed", the time it was last confirmed current). Its
	// directory must exist. Default "": no persistence, no start from disk.
	StatePath string

	// Classes lists the key classes that fail closed. Default: none (serve
	// stale forever).
	Classes []KeyClass

	// ProbeInterval is how often the cache's watch plane confirms that the
	// cache is current (one revision read and a progress request per plane,
	// whatever the number of caches). It bounds how far staleness can overstate
	// the truth. Default DefaultProbeInterval (1 s). Like ResetAfter,
	// RequestTimeout and Backoff, it is asked of the plane's root shared with
	// other components, which follows the most demanding of them.
	ProbeInterval time.Duration
	// ResetAfter: when the cache has not been confirmed current for this long,
	// the watch is presumed hung and is restarted (from the last revision,
	// after backoff). Default DefaultResetAfter (10 s).
	ResetAfter time.Duration
	// RequestTimeout bounds each read (list, probe) and watch open. Default
	// DefaultRequestTimeout (2 s).
	RequestTimeout time.Duration
	// PrivateWatches gives the cache a watch plane of its own (its own
	// upstream etcd watch, closed by Close) instead of the client's shared one.
	// Default false: share.
	PrivateWatches bool
	// InitialTimeout bounds how long New waits for etcd when there is no usable
	// state file. Default DefaultInitialTimeout (5 s).
	InitialTimeout time.Duration
	// DiskFallbackAfter bounds how long New waits for etcd before serving a
	// usable state file. Default DefaultDiskFallbackAfter (50 ms).
	DiskFallbackAfter time.Duration

	// Clock measures staleness and drives timers. Default coord.SystemClock().
	Clock coord.Clock
	// Backoff paces reconnects. Default coord.Backoff{}: full jitter from
	// coord.DefaultBackoffBase (100 ms) to coord.DefaultBackoffCap (30 s).
	Backoff coord.Backoff
	// Logger receives rejections, reconnects and state-file problems.
	// Default slog.Default().
	Logger *slog.Logger
	// MeterProvider for coordkit.failstatic.staleness and the counters.
	// Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

func (c Config[T]) withDefaults() Config[T] {
	c.ProbeInterval = cmp.Or(c.ProbeInterval, DefaultProbeInterval)
	c.ResetAfter = cmp.Or(c.ResetAfter, DefaultResetAfter)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.InitialTimeout = cmp.Or(c.InitialTimeout, DefaultInitialTimeout)
	c.DiskFallbackAfter = cmp.Or(c.DiskFallbackAfter, DefaultDiskFallbackAfter)
	if c.Validate == nil {
		c.Validate = func(T) error { return nil }
	}
	c.Clock = coord.OrSystem(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	return c
}

// validate checks a Config after withDefaults. Errors are *ConfigError.
func (c Config[T]) validate() error {
	bad := func(field, reason string) error { return &ConfigError{Field: field, Reason: reason} }
	watched := "Key"
	if c.Prefix != "" {
		watched = "Prefix"
	}
	switch {
	case (c.Key == "") == (c.Prefix == ""):
		return bad("Key", "exactly one of Key and Prefix is required")
	case !utf8.ValidString(c.Key + c.Prefix):
		return bad(watched, "not valid UTF-8")
	case strings.ContainsRune(c.Key+c.Prefix, 0):
		return bad(watched, "contains NUL")
	case c.Prefix != "" && spansTenants(c.Prefix):
		return bad("Prefix", fmt.Sprintf("%q reaches into /tenants/ without naming one whole tenant: "+
			"it would also watch other tenants' keys (\"/tenants/t1\" matches \"/tenants/t10/…\"); "+
			"use coord.Prefix(tenant, kind) or /tenants/{tenant}/…", pgtext.Clean(c.Prefix, 128)))
	case c.Decode == nil:
		return bad("Decode", "required")
	case c.ProbeInterval < 0:
		return bad("ProbeInterval", "negative")
	case c.ResetAfter < 0:
		return bad("ResetAfter", "negative")
	case c.RequestTimeout < 0:
		return bad("RequestTimeout", "negative")
	case c.InitialTimeout < 0:
		return bad("InitialTimeout", "negative")
	case c.DiskFallbackAfter < 0:
		return bad("DiskFallbackAfter", "negative")
	}
	seen := map[string]bool{}
	for _, k := range c.Classes {
		if k.Name == "" || seen[k.Name] {
			return bad("Classes", fmt.Sprintf("key class name %q empty or duplicated", k.Name))
		}
		if k.MaxStaleness <= 0 {
			return bad("Classes", fmt.Sprintf("key class %q: MaxStaleness must be > 0", k.Name))
		}
		seen[k.Name] = true
	}
	return nil
}

// spansTenants reports whether prefix reaches into the tenant layout without
// naming one whole tenant followed by '/': "/tenants/t1" also matches
// "/tenants/t10/…", and "/" or "/tenants/" match every tenant's keys.
func spansTenants(prefix string) bool {
	const root = "/tenants/"
	if !strings.HasPrefix(prefix, root) && !strings.HasPrefix(root, prefix) {
		return false // outside the tenant layout: taken verbatim
	}
	_, ok := coord.TenantOf(prefix)
	return !ok
}

// watched returns the key or prefix and whether it is a prefix.
func (c Config[T]) watched() (string, bool) {
	if c.Prefix != "" {
		return c.Prefix, true
	}
	return c.Key, false
}
