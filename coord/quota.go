package coord

import (
	"container/list"
	"sync"
	"time"
)

// Default client-side quotas from RFC-COORD-001 MUST 7, and the bound on the
// tenants Quotas tracks at once.
const (
	DefaultMaxValueBytes   = 64 << 10 // 64 KiB per value
	DefaultWritesPerSecond = 200      // per tenant
	DefaultMaxTenants      = 10000    // rate buckets held at once
)

// minBurst is the smallest default Burst: a rate below one write per second
// still allows one write at once.
const minBurst = 1

// Limits are the client-side quotas of one tenant. Zero fields take the defaults.
type Limits struct {
	MaxValueBytes   int     // largest value written under the tenant's prefix; default 64 KiB
	WritesPerSecond float64 // sustained write rate; default 200/s
	Burst           int     // writes allowed at once above the rate; default = WritesPerSecond
}

func (l Limits) withDefaults() Limits {
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultMaxValueBytes
	}
	if l.WritesPerSecond <= 0 {
		l.WritesPerSecond = DefaultWritesPerSecond
	}
	if l.Burst <= 0 {
		l.Burst = max(minBurst, int(l.WritesPerSecond))
	}
	return l
}

// QuotaConfig configures Quotas.
type QuotaConfig struct {
	Default   Limits            // limits of every tenant without an override
	Overrides map[string]Limits // approved exceptions, by tenant
	Clock     Clock             // default SystemClock()
	// MaxTenants bounds the tenants whose write-rate bucket is held at once.
	// A bucket that has refilled is dropped anyway (it is the same as a new one),
	// so only tenants that wrote within about Burst/WritesPerSecond count. Beyond
	// MaxTenants the bucket of the tenant seen least recently is dropped: that
	// tenant starts again with a full burst. Default DefaultMaxTenants (10,000).
	MaxTenants int
}

// Quotas enforces per-tenant value-size and write-rate limits on the client, before
// a request reaches etcd, so one tenant's runaway loop cannot degrade the cluster
// every tenant shares. Safe for concurrent use. Use coord/quotakv to put it in front
// of an etcd KV.
type Quotas struct {
	cfg     QuotaConfig
	clock   Clock
	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	recent  list.List                // buckets, most recently seen first
}

type bucket struct {
	tenant string
	limits Limits
	tokens float64
	last   time.Time
}

// full reports whether b has refilled to its burst by now: then it is the same
// as no bucket at all.
func (b *bucket) full(now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*b.limits.WritesPerSecond >= float64(b.limits.Burst)
}

// NewQuotas returns a quota enforcer.
func NewQuotas(cfg QuotaConfig) *Quotas {
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	return &Quotas{cfg: cfg, clock: OrSystem(cfg.Clock), buckets: map[string]*list.Element{}}
}

func (q *Quotas) limits(tenant string) Limits {
	if l, ok := q.cfg.Overrides[tenant]; ok {
		return l.withDefaults()
	}
	return q.cfg.Default.withDefaults()
}

// AllowWrite charges writes write operations to the tenant owning key, the largest
// of whose values is maxValue bytes. It returns a *QuotaError (ErrQuotaExceeded)
// when a value is too large or the tenant's rate is exhausted, and a *NameError
// (ErrInvalidName) for a key outside the /tenants/{tenant}/ layout. It never blocks;
// a refused call consumes nothing.
func (q *Quotas) AllowWrite(key string, writes, maxValue int) error {
	tenant, ok := TenantOf(key)
	if !ok {
		return &NameError{Field: "key", Value: truncate(key), Reason: "outside /tenants/{tenant}/"}
	}
	l := q.limits(tenant)
	if maxValue > l.MaxValueBytes {
		return &QuotaError{Tenant: tenant, Quota: "value_bytes", Limit: int64(l.MaxValueBytes), Got: int64(maxValue)}
	}
	if writes <= 0 {
		return nil
	}
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.bucket(tenant, l, now)
	b.tokens = min(float64(l.Burst), b.tokens+now.Sub(b.last).Seconds()*l.WritesPerSecond)
	b.last = now
	if b.tokens < float64(writes) {
		return &QuotaError{Tenant: tenant, Quota: "writes_per_second", Limit: int64(l.WritesPerSecond)}
	}
	b.tokens -= float64(writes)
	return nil
}

// bucket returns tenant's bucket, most recently seen from now on. First it drops
// the least recently seen buckets that have refilled by now (each bucket is
// dropped at most once, so this costs O(1) per call on average), and the least
// recently seen one when MaxTenants are held and tenant has none.
func (q *Quotas) bucket(tenant string, l Limits, now time.Time) *bucket {
	for e := q.recent.Back(); e != nil && e.Value.(*bucket).full(now); e = q.recent.Back() {
		q.drop(e)
	}
	if e, ok := q.buckets[tenant]; ok {
		q.recent.MoveToFront(e)
		b := e.Value.(*bucket)
		b.limits = l
		return b
	}
	if len(q.buckets) >= q.cfg.MaxTenants {
		q.drop(q.recent.Back())
	}
	b := &bucket{tenant: tenant, limits: l, tokens: float64(l.Burst), last: now}
	q.buckets[tenant] = q.recent.PushFront(b)
	return b
}

func (q *Quotas) drop(e *list.Element) {
	q.recent.Remove(e)
	delete(q.buckets, e.Value.(*bucket).tenant)
}
