package membership

import (
	"cmp"
	"log/slog"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordkit/coordkit/coord"
)

// Defaults and bounds of SessionConfig.
const (
	// DefaultTTL is the lease TTL: an instance that dies silently stays visible
	// for at most this long.
	DefaultTTL = 15 * time.Second
	// MinTTL and MaxTTL bound SessionConfig.TTL. etcd raises TTLs below its
	// minimum (1.5 election timeouts, 2 s with default settings); above 60 s a
	// dead instance keeps receiving traffic for too long.
	MinTTL = 2 * time.Second
	MaxTTL = 60 * time.Second
	// DefaultRequestTimeout bounds each grant, put and delete.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultBackoffBase and DefaultBackoffCap pace re-grants and re-puts after a
	// loss. The cap keeps recovery within TTL + 5 s of etcd's return however long
	// the outage was, while full jitter spreads a fleet that lost its leases
	// together over [0, cap): 10,000 instances re-register at about 2,000/s.
	DefaultBackoffBase = 100 * time.Millisecond
	DefaultBackoffCap  = 5 * time.Second
)

// SessionConfig configures a Session: the lease and its keepalive, shared by
// every Registration on the session. Every field has a default.
type SessionConfig struct {
	// TTL of the etcd lease. Default DefaultTTL; must be in [MinTTL, MaxTTL].
	// etcd grants whole seconds (rounded up). A keepalive is sent every TTL/3.
	TTL time.Duration

	// KeepaliveTimeout bounds each keepalive RPC. Default TTL/6; must be below
	// TTL/3, so a failed keepalive leaves time for retries before the lease
	// can expire.
	KeepaliveTimeout time.Duration

	// RequestTimeout bounds each grant, put and delete the session and its
	// registrations send (Register, Update and Deregister are bounded by
	// their ctx as well). Default DefaultRequestTimeout.
	RequestTimeout time.Duration

	// Backoff paces new grants and re-puts after a loss, and keepalive retries
	// (whose ceiling is also held below TTL/6). Full jitter, never gives up.
	// Default: Base DefaultBackoffBase, Cap DefaultBackoffCap.
	Backoff coord.Backoff

	// Quotas charges every put and delete to the tenant of its key (value size,
	// write rate) before it is sent. Share one *coord.Quotas across the
	// process to enforce a tenant's rate over all its registrations. Default: a
	// Quotas of the session's own with coord's default limits.
	Quotas *coord.Quotas

	// Clock drives keepalives, backoff and "registered" deadlines; it must be
	// monotonic. Default coord.SystemClock().
	Clock coord.Clock

	// Logger receives losses, re-registrations and keepalive failures.
	// Default slog.Default().
	Logger *slog.Logger

	// MeterProvider for coord.membership.* and coordkit.membership.keepalives.
	// Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// TracerProvider for Register, re-registration and Deregister spans.
	// Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// PrivateWatches gives the session a watch plane of its own (its own
	// upstream etcd watch of the members, closed by Close) instead of the
	// client's shared one. Default false: every registration of the process
	// follows its key through one shared watch per tenant.
	PrivateWatches bool
}

// Config configures one Registration. Tenant, Service and Instance are
// required; the key is /tenants/{Tenant}/members/{Service}/{Instance}.
type Config struct {
	// Tenant, Service and Instance name the key. Each is validated with
	// coord.ValidateName (no '/', no whitespace, printable UTF-8, bounded).
	// Instance must be unique within the service: two live processes with one
	// instance name overwrite each other's key (each notices and re-puts,
	// slowed by the backoff, and logs the other's lease).
	Tenant   string
	Service  string
	Instance string

	// Addr is the address clients dial ("10.0.0.7:8080"). Optional for pure
	// membership; the gRPC resolver skips members without one. At most
	// MaxAddrLen bytes, printable, no whitespace.
	Addr string

	// Metadata travels with the registration (zone, weight, version) and reaches
	// gRPC balancers as attributes. Keys: 1 to MaxMetadataKeyLen bytes of UTF-8
	// without control characters; values: UTF-8 without NUL. The map is encoded by Register and not retained.
	Metadata map[string]string

	// SessionConfig configures the lease of the registration's own session
	// when it is created by Register. It must be left zero for
	// Session.Register, where the session's configuration applies.
	SessionConfig
}

// withDefaults returns a copy of c with every zero field set from the
// Default… constants (KeepaliveTimeout from TTL).
func (c SessionConfig) withDefaults() SessionConfig {
	c.TTL = cmp.Or(c.TTL, DefaultTTL)
	if c.KeepaliveTimeout == 0 {
		c.KeepaliveTimeout = c.TTL / 6
	}
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.Backoff.Base = cmp.Or(c.Backoff.Base, DefaultBackoffBase)
	c.Backoff.Cap = cmp.Or(c.Backoff.Cap, DefaultBackoffCap)
	if c.Quotas == nil {
		c.Quotas = coord.NewQuotas(coord.QuotaConfig{})
	}
	c.Clock = coord.OrSystem(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MeterProvider = cmp.Or(c.MeterProvider, otel.GetMeterProvider())
	c.TracerProvider = cmp.Or(c.TracerProvider, otel.GetTracerProvider())
	return c
}

// validate checks a SessionConfig after withDefaults. Errors are *ConfigError.
func (c SessionConfig) validate() error {
	switch {
	case c.TTL < MinTTL || c.TTL > MaxTTL:
		return &ConfigError{Field: "TTL", Reason: c.TTL.String() + " outside [" + MinTTL.String() + ", " + MaxTTL.String() + "]"}
	case c.KeepaliveTimeout < 0:
		return &ConfigError{Field: "KeepaliveTimeout", Reason: "negative"}
	case c.KeepaliveTimeout >= c.TTL/3:
		return &ConfigError{Field: "KeepaliveTimeout", Reason: c.KeepaliveTimeout.String() + " is not below TTL/3 = " + (c.TTL / 3).String()}
	case c.RequestTimeout < 0:
		return &ConfigError{Field: "RequestTimeout", Reason: "negative"}
	case c.Backoff.Base < 0 || c.Backoff.Cap < 0:
		return &ConfigError{Field: "Backoff", Reason: "negative"}
	}
	return nil
}

// keepaliveBackoff paces keepalive retries: full jitter below TTL/6, so several
// retries fit before the lease can expire.
func (c SessionConfig) keepaliveBackoff() coord.Backoff {
	b := c.Backoff
	b.Cap = min(b.Cap, c.TTL/6)
	b.Base = min(b.Base, b.Cap)
	return b
}

// isZero reports whether no field of c is set (Session.Register requires it).
func (c SessionConfig) isZero() bool { return reflect.ValueOf(c).IsZero() }

// Record validates the naming and payload fields of c and returns the key
// (/tenants/{Tenant}/members/{Service}/{Instance}) and the value that Register
// would put, for a caller that attaches the key to a lease it keeps alive itself
// (package ownership puts it on its correctnesslease session, so a member has one
// keepalive for its member key and its partition keys). A Watcher of the service
// sees such a key as a member like any other; nothing re-puts it after a loss.
// It does not block. Errors are *ConfigError (ErrInvalidConfig).
func (c Config) Record() (key, value string, err error) {
	in, err := c.validate()
	if err != nil {
		return "", "", err
	}
	return in.key, in.value, nil
}

// DecodeRecord is Record's inverse for a value: the address and metadata of a
// member key's value, ok false for a value that is not a member record. It does
// not block.
func DecodeRecord(value []byte) (addr string, metadata map[string]string, ok bool) {
	m, ok := decodeMember("", value, 0, 0, 0)
	return m.Addr, m.Metadata, ok
}

// instance is a validated Config: the key and its encoded value.
type instance struct {
	tenant, service, name string
	key                   string
	addr                  string
	value                 string // the encoded address and metadata
}

// validate checks the naming and payload fields of c and returns the key and
// its encoded value. Errors are *ConfigError (an invalid name unwraps to the
// *coord.NameError).
func (c Config) validate() (instance, error) {
	prefix, err := servicePrefix("Tenant", c.Tenant, "Service", c.Service)
	if err != nil {
		return instance{}, err
	}
	if err := nameError("Instance", c.Instance, coord.MaxNameLen); err != nil {
		return instance{}, err
	}
	v, err := encodeValue(c.Addr, c.Metadata)
	if err != nil {
		return instance{}, err
	}
	return instance{tenant: c.Tenant, service: c.Service, name: c.Instance, key: prefix + c.Instance, addr: c.Addr, value: v}, nil
}
