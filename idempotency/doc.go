// Package idempotency implements Stripe-grade idempotency keys stored with the effect,
// in the caller's PostgreSQL transaction (RFC-COORD-001 rule 1).
//
// A request carries a [Key] (a scope — tenant or principal — and the client's key)
// and a canonical [Fingerprint] of what it asks for. [Store.DoTx] inserts the key row
// in the caller's transaction and runs the effect in the same transaction, so the key
// and the effect commit or roll back together; [Store.Do] opens and commits that
// transaction itself. The outcomes:
//
//   - new key: the effect runs once and its [Response] is stored with the key;
//   - completed key, same fingerprint: the stored response is replayed, byte-identical,
//     and the effect does not run ([Result.Replayed]);
//   - same key, different fingerprint: [*MismatchError] (HTTP 422);
//   - a concurrent duplicate still running: [*InFlightError] with a retry-after hint
//     (HTTP 409). A duplicate waits at most [Config.WaitTimeout] for the first request's
//     transaction before it gets this error; it never runs the effect a second time.
//
// Effects that cannot join the transaction (a payment provider call) use atomic phases:
// an [Operation] is a list of [Phase]s, each committing a recovery point; the key is
// passed through to the external call; a crashed request is resumed from its recovery
// point by a retry after its lock expires ([Store.Run]) or by a [Completer].
//
// Keys are kept at least 24 hours ([Config.Retention]) and pruned in bounded batches by
// a [Pruner]. The HTTP middleware (package httpidem) and the gRPC interceptor (package
// grpcidem) speak this package's semantics on the wire.
package idempotency
