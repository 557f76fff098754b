// Package fencetest certifies that a resource rejects stale lease holders: a
// conformance kit a team runs, in its own tests, against its OWN fenced resource
// (a database table, a service endpoint, a file store) through a two-method
// interface, [Resource]: write a value under a key with a fencing token, read it back.
//
// [Run] checks, with tokens minted by real correctnesslease leases on a real etcd:
//
//   - StaleTokenRejected: after a newer token wrote, an older one is refused with an
//     error matching coord.ErrStaleToken, and its value never becomes visible;
//   - EqualTokenAccepted: the holder may write many times with its token;
//   - NewerTokenAccepted: a successor's token is accepted and its value visible;
//   - ConcurrentWritersNeverRegress: writers racing with interleaved old and new
//     tokens: no write is accepted after a newer token's write has completed, no
//     reader sees the token of what it reads go backwards, every rejection is
//     justified by a newer accepted token, and the final value is the newest
//     token's;
//   - PausedHolder: a holder checks its lease, stalls until etcd expires the lease
//     (its etcd traffic is blackholed through a proxy, as a paused process would be
//     silent), a rival acquires the lease and writes, then the stalled holder's
//     write arrives with its old token and must be rejected.
//
// Each check uses its own lease name and key, so a resource may fence per key, per
// lease or globally. The kit needs etcd endpoints it can reach
// (coordtest.Etcd(t).Endpoints in tests) and fails, never skips, without them.
//
// fencetest is for tests only; library code never imports it.
package fencetest
