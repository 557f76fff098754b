// Package fencetoken defines an Analyzer that reports correctness leases whose
// fencing token never reaches a resource.
//
// # Analyzer fencetoken
//
// fencetoken: report a lease or leader term whose fencing token never reaches a write
//
// A correctness lease does not make its holder the only writer: a holder that
// paused past its TTL still believes it leads. What stops it is the fencing
// token, carried with every write and checked by the resource (RFC principle 2,
// RFC MUST 3). A lease whose token reaches no write is a lock without a fence.
// The check reports:
//
//   - a token holder from the SDK (correctnesslease.Acquire or TryAcquire, or
//     any SDK call returning a type with a Token() coord.Token method, such as
//     an owned partition) that is discarded, as a statement or into _;
//   - a holder's Token() whose result is dropped;
//   - a holder kept in a local variable whose token never reaches a write;
//   - a function literal given to the SDK (correctnesslease.Run, …) whose
//     coord.Token parameter is unnamed, _, or never reaches a write.
//
// A token reaches a write when it (or a value made from it: tok.String(),
// tok.Revision(), strconv or fmt of those, a struct holding it) is passed to
// a fence (pgfence GuardTx, Exec, RowUpdater.Update), a query argument, a
// header, any call the check cannot see into, or a helper whose fact says its
// token parameter reaches a write — in this package or another; or when it is
// returned, stored outside the function or sent on a channel. Logging it (log,
// log/slog, zap, logrus, zerolog, fmt.Print*, OpenTelemetry attributes),
// wrapping it in an error, comparing it, assigning it to _, calling Release,
// Context or Done, and handing it to a helper that itself only logs or drops
// it are not writes. When the token went somewhere (logged, handed to such a
// helper), the finding sits on that line — the line to change — and names the
// acquire's line (an exception directive at the acquire still covers it);
// when it went nowhere, the finding sits on the acquire.
//
// The package that declares the holder is exempt (its own examples show the
// API). In _test.go files only Example functions are checked, because they are
// the code users copy; tests may hold a lease just to contend for it.
//
// Bad:
//
//	lease, err := correctnesslease.Acquire(ctx, session, "billing")
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx)
//	slog.Info("leading", "token", lease.Token()) // logged is not fenced
//	return ledger.ChargeAll(ctx, invoices)     // a paused holder charges twice
//
// Good:
//
//	lease, err := correctnesslease.Acquire(ctx, session, "billing")
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx)
//	return pgfence.Exec(ctx, pool, lease.Token(), func(tx pgx.Tx) error {
//		return ledger.ChargeAllTx(ctx, tx, invoices) // stale tokens are rejected
//	})
//
// and with the leader loop:
//
//	err := correctnesslease.Run(ctx, session, "billing",
//		func(ctx context.Context, tok coord.Token) error {
//			return ledger.ChargeAll(ctx, tok, invoices) // ChargeAll fences with tok
//		}, nil)
package fencetoken
