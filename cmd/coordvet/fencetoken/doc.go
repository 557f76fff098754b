// Package fencetoken defines an Analyzer that reports correctness leases whose
// fencing token never reaches a resource.
//
// # Analyzer fencetoken
//
// fencetoken: report a correctness lease acquired but its fencing token never used
//
// A correctness lease does not make its holder the only writer: a holder that
// paused past its TTL still believes it leads. What stops it is the fencing
// token, carried with every write and checked by the resource (RFC principle 2,
// RFC MUST 3). A lease whose token never leaves the function is a lock without
// a fence. The check reports:
//
//   - a call of correctnesslease.Acquire or TryAcquire (any function of the
//     package returning a *Lease) whose lease is discarded, as a statement or
//     into _;
//   - a call of (*Lease).Token() whose result is dropped;
//   - a lease held in a local variable of a function (closures included) that
//     never calls Token() on it and does not let it escape (return it, pass it
//     to a call, store it, send it);
//   - a func literal given to correctnesslease.Run (or any function of the
//     package) whose coord.Token parameter is unnamed, _ or never used.
//
// Calling Release, Context or Done on a lease, comparing it with nil and
// assigning it to _ do not count as using the token. Package correctnesslease
// itself is exempt. In _test.go files only Example functions are checked,
// because they are the code users copy; tests may hold a lease just to contend
// for it.
//
// Bad:
//
//	lease, err := correctnesslease.Acquire(ctx, session, "billing")
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx)
//	return ledger.ChargeAll(ctx, invoices) // a paused holder charges twice
//
// Good:
//
//	lease, err := correctnesslease.Acquire(ctx, session, "billing")
//	if err != nil {
//		return err
//	}
//	defer lease.Release(ctx)
//	return ledger.ChargeAll(ctx, lease.Token(), invoices) // stale tokens are rejected
//
// and with the leader loop:
//
//	err := correctnesslease.Run(ctx, session, "billing",
//		func(ctx context.Context, tok coord.Token) error {
//			return ledger.ChargeAll(ctx, tok, invoices)
//		}, nil)
package fencetoken
