package coord

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Default client-side quotas from RFC-COORD-001 MUST 7, the watch budget, and
// the bound on the tenants Quotas tracks at once.
const (
	DefaultMaxValueBytes   = 64 << 10 // 64 KiB per value
	DefaultWritesPerSecond = 200      // per tenant
	DefaultMaxTenants      = 10000    // rate buckets held at once
	// DefaultMaxWatches bounds the upstream etcd watches a process holds open
	// under one tenant's prefix. coordkit's watch plane opens one per
	// (client, tenant, kind), so a process uses a handful.
	DefaultMaxWatches = 32
	// DefaultWatchOpensPerSecond and DefaultWatchOpenBurst are the reconnect
	// budget: upstream watch opens (first opens, resumes after a failure) and
	// re-lists of a tenant's prefixes, per process. A storm of reconnects is
	// paced by it instead of amplified.
	DefaultWatchOpensPerSecond = 2
	DefaultWatchOpenBurst      = 20
)

// minBurst is the smallest default Burst: a rate below one write per second
// still allows one write at once.
const minBurst = 1

// Limits are the client-side quotas of one tenant. Zero fields take the defaults.
type Limits struct {
	MaxValueBytes   int     // largest value written under the tenant's prefix; default 64 KiB
	WritesPerSecond float64 // sustained write rate; default 200/s
	Burst           int     // writes allowed at once above the rate; default = WritesPerSecond

	// MaxWatches bounds the upstream etcd watches open at once under the
	// tenant's prefix. Default DefaultMaxWatches.
	MaxWatches int
	// WatchOpensPerSecond and WatchOpenBurst are the reconnect budget: upstream
	// watch opens and re-lists under the tenant's prefix. Default
	// DefaultWatchOpensPerSecond and DefaultWatchOpenBurst.
	WatchOpensPerSecond float64
	WatchOpenBurst      int
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
	if l.MaxWatches <= 0 {
		l.MaxWatches = DefaultMaxWatches
	}
	if l.WatchOpensPerSecond <= 0 {
		l.WatchOpensPerSecond = DefaultWatchOpensPerSecond
	}
	if l.WatchOpenBurst <= 0 {
		l.WatchOpenBurst = DefaultWatchOpenBurst
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
// every tenant shares; and it holds a tenant's upstream watches and their
// reconnects to a budget (quota_watch.go). Safe for concurrent use. Use
// coord/quotakv to put it in front of an etcd KV.
type Quotas struct {
	cfg        QuotaConfig
	clock      Clock
	mu         sync.Mutex
	writes     rates          // per tenant: writes
	reconnects rates          // per tenant: upstream watch opens and re-lists
	watches    map[string]int // per tenant: upstream watches open
}

// NewQuotas returns a quota enforcer.
func NewQuotas(cfg QuotaConfig) *Quotas {
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	return &Quotas{cfg: cfg, clock: OrSystem(cfg.Clock),
		writes: newRates(cfg.MaxTenants), reconnects: newRates(cfg.MaxTenants), watches: map[string]int{}}
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
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.writes.take(tenant, float64(writes), l.WritesPerSecond, l.Burst, q.clock.Now()) {
		return &QuotaError{Tenant: tenant, Quota: "writes_per_second", Limit: int64(l.WritesPerSecond)}
	}
	return nil
}

// rates holds one token bucket per tenant, bounded: a bucket that has refilled
// is the same as none and is dropped, and beyond max buckets the one seen least
// recently is dropped (that tenant starts again with a full burst).
type rates struct {
	max     int
	buckets map[string]*list.Element // of *bucket
	recent  list.List                // buckets, most recently seen first
}

type bucket struct {
	tenant string
	rate   float64
	burst  int
	tokens float64
	last   time.Time
}

func newRates(max int) rates { return rates{max: max, buckets: map[string]*list.Element{}} }

// full reports whether b has refilled to its burst by now: then it is the same
// as no bucket at all.
func (b *bucket) full(now time.Time) bool {
	return b.tokens+now.Sub(b.last).Seconds()*b.rate >= float64(b.burst)
}

// take removes n tokens from tenant's bucket (rate per second, burst) and
// reports whether there were enough; a refused take consumes nothing.
func (r *rates) take(tenant string, n, rate float64, burst int, now time.Time) bool {
	b := r.bucket(tenant, rate, burst, now)
	b.tokens = min(float64(burst), b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// bucket returns tenant's bucket, most recently seen from now on. First it drops
// the least recently seen buckets that have refilled by now (each bucket is
// dropped at most once, so this costs O(1) per call on average), and the least
// recently seen one when max are held and tenant has none.
func (r *rates) bucket(tenant string, rate float64, burst int, now time.Time) *bucket {
	for e := r.recent.Back(); e != nil && e.Value.(*bucket).full(now); e = r.recent.Back() {
		r.drop(e)
	}
	if e, ok := r.buckets[tenant]; ok {
		r.recent.MoveToFront(e)
		b := e.Value.(*bucket)
		b.rate, b.burst = rate, burst
		return b
	}
	if len(r.buckets) >= r.max {
		r.drop(r.recent.Back())
	}
	b := &bucket{tenant: tenant, rate: rate, burst: burst, tokens: float64(burst), last: now}
	r.buckets[tenant] = r.recent.PushFront(b)
	return b
}

func (r *rates) drop(e *list.Element) {
	r.recent.Remove(e)
	delete(r.buckets, e.Value.(*bucket).tenant)
}

// WaitWrite charges writes write operations to the tenant owning key like
// AllowWrite, but paces instead of refusing: while the tenant's rate is
// exhausted it blocks on the Quotas' clock until enough tokens have refilled,
// so a burst of writes (a member acquiring many partitions) stays within the
// tenant's rate. It returns the number of times it had to wait, ctx's cause when
// ctx ends first, and a *NameError for a key outside the tenant layout.
func (q *Quotas) WaitWrite(ctx context.Context, key string, writes int) (waited int, err error) {
	tenant, ok := TenantOf(key)
	if !ok {
		return 0, &NameError{Field: "key", Value: truncate(key), Reason: "outside /tenants/{tenant}/"}
	}
	for {
		l := q.limits(tenant)
		need := float64(min(writes, l.Burst)) // more than a burst can never be granted at once
		now := q.clock.Now()
		q.mu.Lock()
		if q.writes.take(tenant, need, l.WritesPerSecond, l.Burst, now) {
			q.mu.Unlock()
			return waited, nil
		}
		b := q.writes.bucket(tenant, l.WritesPerSecond, l.Burst, now)
		wait := time.Duration((need - b.tokens) / l.WritesPerSecond * float64(time.Second))
		q.mu.Unlock()
		waited++
		t := q.clock.NewTimer(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return waited, context.Cause(ctx)
		case <-t.C():
		}
	}
}
