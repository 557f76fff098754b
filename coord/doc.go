// Package coord is the vocabulary every coordkit package shares: fencing tokens,
// classified errors, the tenant key layout and its validation, client-side quotas,
// full-jitter backoff, the clock seam and the telemetry names.
//
// It is the floor of the module: it imports nothing else of coordkit and no driver,
// so a resource that only checks tokens (a ledger service, a payment gateway) can
// depend on it without pulling in etcd, pgx or Redis.
//
// The rules it encodes come from RFC-COORD-001 (docs/rfc.md):
//
//   - A [Token] is the etcd create revision of a lease holder's key. Only
//     correctnesslease mints tokens; resources receive them over the wire and
//     [ParseToken] them, then reject any token older than the highest they have seen.
//   - Errors are classified so callers can react without string matching:
//     [ErrStaleToken] (step down, never retry), [ErrAuthorityLost] (stop writing),
//     [ErrNoLeader] (etcd has no leader: retry later), [ErrQuotaExceeded] (a tenant
//     bug: do not retry fast), [ErrCompacted] (re-list). [Retryable] says which are
//     worth retrying, for these and for every package's own errors, which answer
//     through [RetryableError].
//   - Keys live under /tenants/{tenant}/{elections|locks|members|config}/{name}.
package coord
