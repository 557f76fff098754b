// Package correctnesslease gives a process leadership whose every write can be
// fenced: an etcd-backed lease that always comes with a [coord.Token] (the create
// revision of the holder's key) and that steps down before etcd can hand the lease
// to someone else.
//
// A [Session] owns one etcd lease and keeps it alive with its own loop: one
// keepalive every TTL/3, each measured on the monotonic clock from the moment it
// was sent. When no keepalive has succeeded for 2/3 of the TTL the session steps
// down: every [Lease] on it loses authority at once, its [Lease.Context] is
// cancelled with a *coord.AuthorityLostError cause. etcd can expire the lease only
// a full TTL after the last keepalive it received, which is after the last one we
// sent, so the step-down always comes first (on a clock that does not pause; a
// paused process is what the token and the resource-side check are for).
//
// [Acquire] queues FIFO by create revision, watches only its predecessor (no
// herd) and its own key (a deleted key while waiting is an error, never a lease
// without a key). [Run] is the leader loop; [Observe] reports holder changes.
//
// Authority is not enough: a holder can be paused past its lease. Every write
// must carry [Lease.Token] to a resource that rejects older tokens (pgfence for
// PostgreSQL; testing/fencetest certifies your own resource).
package correctnesslease
