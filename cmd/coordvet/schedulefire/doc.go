// Package schedulefire defines an Analyzer that reports a schedule handler
// whose effect outside the fire's transaction ignores the fire's key and
// token.
//
// # Analyzer schedulefire
//
// schedulefire: report a schedule handler whose effect ignores the fire's key and token
//
// A schedule.Handler runs each fire in a transaction that already holds the
// fence check of its partition's token and the fire's record, so what it
// writes with that transaction happens once per fire. An effect anywhere else
// — a write through a pool or another connection, a transaction of its own, a
// broker publish, an HTTP request — is outside that guarantee: a retried fire,
// or a scheduler paused past its lease, performs it again, unless the fire's
// idempotency key (f.Key()) reaches the receiver so that it deduplicates, or
// the fire's token (f.Token) fences it (RFC MUST 1, MUST 3). The check finds
// every function that takes a *schedule.Fire and reports, in its body, each
// call that writes, begins or commits a transaction, publishes or sends an
// HTTP request (net/http Client.Do, Post, PostForm; the table of What counts
// for the rest) when nothing derived from the fire — f.Key(), f.ID, f.Token,
// a variable assigned from them, a request whose header was set from them —
// is among its arguments or its receiver. Calls on the handler's own pgx.Tx
// parameter are the fire's transaction and are not reported. Test files are
// checked too; package schedule itself is exempt.
//
// Bad:
//
//	Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
//		_, err := pool.Exec(ctx, `INSERT INTO invoices (month) VALUES ($1)`, month)
//		return err
//	},
//
// Good:
//
//	Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
//		_, err := tx.Exec(ctx, `INSERT INTO invoices (month) VALUES ($1)`, month)
//		return err
//	},
//	Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
//		req.Header.Set("Idempotency-Key", f.Key())
//		_, err := psp.Do(req)
//		return err
//	},
package schedulefire
