// Package pgfence is the resource side of a correctness lease in PostgreSQL: it
// rejects writes that carry a fencing token older than the newest one the database
// has accepted, so a lease holder that was paused past its lease (a GC pause, a
// frozen VM) cannot write after its successor has.
//
// Two forms, both fed a [coord.Token] the writer got from correctnesslease (or
// parsed from the wire with [coord.ParseToken]):
//
//   - Transaction fence. [Fence.GuardTx] records the highest token per lease name in
//     the fence table (default "coord_fences") with one INSERT … ON CONFLICT DO UPDATE
//     … WHERE revision <= excluded.revision. An older token gets a
//     [*coord.StaleTokenError]; an equal or newer one is recorded and its fence row
//     stays locked until the transaction ends, so every write in that transaction is
//     fenced: a newer holder's GuardTx waits for it, and it cannot commit after a
//     newer holder has. [Fence.Exec] is begin, guard, fn, commit.
//
//   - Row fence, for hot single-row updates. [RowUpdater] issues
//     UPDATE t SET …, fence = $tok WHERE key AND fence <= $tok: one statement, no
//     fence table. When no row matched it tells a stale token
//     ([*coord.StaleTokenError]) from a missing row ([ErrRowNotFound]).
//
// The package-level [Migrate], [GuardTx] and [Exec] use the default Config (table
// "coord_fences"); [New] builds a Fence with another table, schema, meter provider or
// logger.
//
// Every rejection is logged and counted in coordkit.pgfence.rejected with the lease name
// (attribute coordkit.lease): alert on it — a stale holder was stopped, find out why
// it was stale. Table and column names are validated and always quoted with
// pgx.Identifier; values always travel as query parameters.
package pgfence
