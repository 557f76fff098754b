package coord

import "time"

// OpenWatch charges one upstream etcd watch on prefix to the tenant owning it,
// until release is called (release is idempotent). It returns a *QuotaError
// (ErrQuotaExceeded, Quota "watches") when the tenant holds MaxWatches already. A
// prefix outside the /tenants/{tenant}/ layout belongs to no tenant and is not
// charged. It never blocks.
func (q *Quotas) OpenWatch(prefix string) (release func(), err error) {
	tenant, ok := TenantOf(prefix)
	if !ok {
		return func() {}, nil
	}
	l := q.limits(tenant)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.watches[tenant] >= l.MaxWatches {
		return nil, &QuotaError{Tenant: tenant, Quota: "watches", Limit: int64(l.MaxWatches), Got: int64(q.watches[tenant] + 1)}
	}
	q.watches[tenant]++
	released := false
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if released {
			return
		}
		released = true
		if q.watches[tenant]--; q.watches[tenant] <= 0 {
			delete(q.watches, tenant)
		}
	}, nil
}

// Watches returns the upstream watches the tenant holds open, as charged by
// OpenWatch. It never blocks.
func (q *Quotas) Watches(tenant string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.watches[tenant]
}

// AllowReconnect charges one upstream watch open (a first open or a resume after
// a failure) or one re-list of prefix to the tenant's reconnect budget
// (WatchOpensPerSecond, WatchOpenBurst). When the budget is spent it returns a
// *QuotaError (Quota "watch_opens_per_second") and how long until the next
// token: the caller waits that long (a reconnect storm is paced, not failed). A
// prefix outside the tenant layout is not charged. It never blocks; a refused
// call consumes nothing.
func (q *Quotas) AllowReconnect(prefix string) (retryAfter time.Duration, err error) {
	tenant, ok := TenantOf(prefix)
	if !ok {
		return 0, nil
	}
	l := q.limits(tenant)
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.reconnects.take(tenant, 1, l.WatchOpensPerSecond, l.WatchOpenBurst, now) {
		return 0, nil
	}
	b := q.reconnects.bucket(tenant, l.WatchOpensPerSecond, l.WatchOpenBurst, now)
	wait := time.Duration((1 - b.tokens) / l.WatchOpensPerSecond * float64(time.Second))
	return max(wait, time.Millisecond), &QuotaError{Tenant: tenant, Quota: "watch_opens_per_second", Limit: int64(l.WatchOpensPerSecond)}
}
