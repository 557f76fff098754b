// Package efficiencylock is a Redis lock for work whose duplicate execution is
// harmless: cache warm-ups, report regeneration, deduplicating expensive but
// idempotent jobs. It saves work; it does not make anything correct.
//
// Constructing a [Locker] requires a declared reason, so the code says why a lock
// without a fence is good enough here (RFC-COORD-001 MUST 4):
//
//	locker, err := efficiencylock.New(rdb,
//		efficiencylock.DuplicatesHarmless("cache warm-up: a second warm-up only costs CPU"), efficiencylock.Config{})
//	if err != nil {
//		return err
//	}
//	lock, err := locker.TryAcquire(ctx, "warm-catalog", 30*time.Second, nil)
//	if errors.Is(err, efficiencylock.ErrNotAcquired) {
//		return nil // someone else is doing it
//	}
//	if err != nil {
//		return err
//	}
//	defer lock.Release(context.WithoutCancel(ctx))
//	warm(lock.Context())
//
// # How it works
//
// [Locker.TryAcquire] sends one SET key value NX PX ttl with a value of 16 random
// bytes (crypto/rand) minted for that acquisition. [Lock.Refresh], [Lock.Release]
// and [Lock.TTL] are Lua scripts (embedded .lua files) that compare the stored value
// with the guard's before they act, so a guard never extends, deletes or reports a
// lock that is no longer its own, and a refresh never re-creates an expired key.
// Keys live under the tenant layout /tenants/{tenant}/locks/{name}.
//
// A guard estimates its validity on the local monotonic clock from the moment the
// acquiring or refreshing command was sent, minus a drift allowance (ttl/100 + 2 ms),
// so it gives up no later than Redis expires the key. [Lock.Context] is cancelled,
// with a [*LostError] cause, when that estimate runs out, when a refresh fails, or
// when Redis answers that the key is gone or belongs to someone else; optional
// auto-refresh ([Config.AutoRefresh], [LockOpts.AutoRefresh]) refreshes every ttl/3.
//
// # Why there is no fencing token
//
// A lock is only as safe as the check made where the side effect happens. This
// package deliberately exposes no token, because none it could mint would be
// trustworthy:
//
//   - A counter kept in Redis (INCR) can go backwards: replication is asynchronous,
//     so after a failover the promoted replica may never have seen the latest
//     increments, and a restart without persistence resets it to zero. Two holders
//     could then present the same or a decreasing token.
//   - Expiry is measured on wall clocks (the server's, for PX; the client's, for
//     the validity estimate). A clock jump, a paused Redis or a paused client (a long
//     GC pause) lets two clients believe they hold the lock at once.
//
// The package's own tests demonstrate it: they pause and restart Redis while
// workers take the lock and count the duplicate executions. When duplicates are
// not harmless, use correctnesslease (etcd leases with a fencing token checked at
// the resource, e.g. by pgfence) instead.
package efficiencylock
