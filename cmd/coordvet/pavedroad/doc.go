// Package pavedroad defines an Analyzer that reports hand-rolled locks and
// elections built on etcd or Redis outside the coordkit SDK.
//
// # Analyzer pavedroad
//
// pavedroad: report raw etcd mutexes and elections, Redis SET NX and redsync outside the SDK
//
// A lock built directly on etcd's concurrency package, on Redis SET NX or on
// redsync hands its holder authority without a fencing token, so a holder that
// paused past its TTL keeps writing next to its successor (RFC MUST 3), and a
// Redis lock used for correctness breaks RFC MUST 4 (Redis locks only where
// duplicates are harmless, and the code says so). The check reports, in
// packages outside github.com/coordkit/coordkit:
//
//   - calls of go.etcd.io/etcd/client/v3/concurrency NewMutex, NewLocker and
//     NewElection;
//   - go-redis SetNX, a SetArgs literal with Mode "NX", and SET … NX spelled
//     out in Do, or in a constant Lua script given to Eval, EvalRO, EvalSha,
//     ScriptLoad or NewScript;
//   - github.com/go-redsync/redsync where it is used: every mutex it makes
//     (rs.NewMutex), or — in a package that makes none — the first reference to
//     the package in each file (redsync.New), not the import line.
//
// A dedupe marker is not a lock: SetNX on a key whose constant prefix names
// one (seen:, dedup:, dedupe:, processed:, handled:, idem:, idempotency:,
// once:, done:, consumed:, delivered:) answers "first time?" and is never
// released, so it is not reported — unless the same function deletes or
// extends that key (Del, Unlink, Expire, a script), which is how a lock is
// released.
//
// Test files (_test.go) are exempt: tests and benchmarks may compare against the
// raw primitives. The fix is the paved road: correctnesslease for a single
// owner whose writes must be fenced, efficiencylock with a declared reason for
// work whose duplication is harmless.
//
// Bad:
//
//	s, err := concurrency.NewSession(cli)
//	if err != nil {
//		return err
//	}
//	m := concurrency.NewMutex(s, "/locks/billing")
//	if err := m.Lock(ctx); err != nil {
//		return err
//	}
//	chargeAll(ctx, db) // a paused holder charges twice
//
// Good:
//
//	lease, err := correctnesslease.Acquire(ctx, session, "billing")
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx)
//	return chargeAll(ctx, db, lease.Token()) // the ledger rejects a stale token
package pavedroad
