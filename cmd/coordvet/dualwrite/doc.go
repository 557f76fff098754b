// Package dualwrite defines an Analyzer that reports units of code that both
// commit to a database and publish to a message broker.
//
// # Analyzer dualwrite
//
// dualwrite: report code that commits to a database and publishes to a broker outside the outbox
//
// Commit-then-publish (or publish-then-commit) is a dual write: a crash, a
// timeout or a broker outage between the two leaves the database and the
// event stream disagreeing for good, so consumers miss an event or see one for
// a change that never happened (RFC MUST 2). Events derived from state changes
// are written to the outbox table in the same transaction ((*outbox.Outbox).EnqueueTx)
// and published by the outbox relay.
//
// The check reports a publish in a unit that also commits through another
// call, and links the commit. A unit is a function, or a function literal of
// its own: a literal called where it stands (directly, through a local
// variable, by defer or go), a transaction callback (pgx.BeginFunc's fn,
// pgfence Exec's fn, idempotency Store.Do's fn, a helper's that passes its
// function on to one) or a function given to errgroup.Group.Go, sync.WaitGroup.Go
// or sync.Once.Do joins the enclosing unit; any other literal — an HTTP handler,
// a callback for later — is a unit of its own, so two unrelated handlers are
// never paired.
//
// Commits and publishes are found through helpers, one call deep or many,
// in this package or another (analysis facts), and through interfaces: a
// method whose name matches a known broker client's and whose signature names
// the client's package or has its shape, or an interface whose dynamic types in
// the package publish. The calls that count are the table in docs/vet.md
// ("What counts"): driver commits, the SDK's committing helpers (pgfence Exec,
// idempotency Store.Do and Run, saga.Start), autocommitted Exec/Query on a
// pool, connection or *sql.DB (DML only), and broker publishes, the SDK's own
// outbox publishers included when called outside the relay. A publish silenced
// by a valid exception does not make its callers dual writes. The outbox
// package and its subpackages (the relay, the broker publishers) are exempt.
// Test files are checked too.
//
// Both lists are extensible with flags that take comma-separated entries of the
// form importpath:Name (a package function, or a method Name of any type of the
// package) or importpath:Type.Name (a method of one type):
//
//	coordvet -dualwrite.brokers='example.com/bus:Client.Send,example.com/sns:Publish' ./...
//	go vet -vettool=$(which coordvet) -dualwrite.commits='example.com/db:Tx.Commit' ./...
//
// Bad:
//
//	if err := s.repo.Save(ctx, tx, order); err != nil { // Save: tx.Exec
//		return err
//	}
//	if err := tx.Commit(ctx); err != nil {
//		return err
//	}
//	return s.bus.Emit(ctx, "orders.placed", payload) // Bus's dynamic type publishes to NATS
//
// Good:
//
//	if _, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: id, Type: "order.placed", Payload: payload}); err != nil {
//		return err
//	}
//	return tx.Commit(ctx) // the relay publishes the event iff this commits
package dualwrite
