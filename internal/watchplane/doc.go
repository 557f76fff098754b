// Package watchplane is coordkit's one etcd watch machinery: every etcd watch
// of the SDK goes through it (the conventions test refuses a clientv3 Watch call
// anywhere else), so its lessons — resume from a revision, re-list after a
// compaction, detect a silent stream, never block a caller on an unreachable
// etcd, pace reconnects — are written once.
//
// A Plane keeps one upstream etcd watch per root prefix and fans its events out
// to every Sub in the process whose key or prefix lies under that root. The root
// of a key in the tenant layout is its tenant's kind, /tenants/{t}/{kind}/
// (RootOf): a correctnesslease session holding 200 leases, 200 membership
// registrations, ten watchers of one service and ten caches of one config key
// each cost etcd one watcher, not one per key.
//
// Each root mirrors its keys (one linearizable list, then kept current by the
// watch) and keeps a bounded history of recent events, so a subscriber starts
// from, or resumes at, its own revision without touching etcd: from the history
// when the revision is recent, else as a resync — the whole state of its range at
// the mirror's revision. After a compaction the root re-lists once, jittered,
// for all its subscribers (never one re-list per subscriber). A subscriber that
// does not keep up is never waited for: past Config.Buffer queued events its
// queue is dropped and it is told to resync, so memory stays bounded and the
// others are not delayed.
//
// Freshness is confirmed independently of the event stream: every probe
// interval the plane reads etcd's current revision (one O(1) linearizable read
// for all roots) and asks etcd for a progress notification on its watch stream;
// a root whose mirror reaches that revision is confirmed current as of the read's
// send time (Sub.Confirmed). Where progress requests are not supported (etcd's
// grpc-proxy) the plane compares the root's key count and highest mod revision
// instead. A root left unconfirmed for its ResetAfter is presumed hung and its
// watch is re-opened from the mirror's revision (a resume, not a re-list).
//
// Nothing here blocks a caller on etcd: Subscribe registers and returns; the
// plane lists, opens and re-opens in its own goroutines, with full-jitter
// backoff (coord.Backoff) and the tenant's reconnect budget (coord.Quotas).
//
// Sharing is the default: For(cli, clock) returns the plane of that client and
// clock, shared by every coordkit component built on them; it ends when the
// client is closed. New returns a private plane, which its owner closes.
package watchplane
