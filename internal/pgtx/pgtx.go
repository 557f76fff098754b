// Package pgtx holds the transaction chores that packages driving a *pgx.Conn by
// hand (BEGIN in a batch, COMMIT in a batch) share.
package pgtx

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// RollbackTimeout bounds the ROLLBACK that RollbackConn and Rollback send.
const RollbackTimeout = 5 * time.Second

// RollbackConn ends whatever transaction c is still in (open or aborted), so the
// connection can go back to its pool and release its locks now. It runs even when
// ctx is already done (keeping ctx's values), for at most RollbackTimeout. A closed
// or idle connection is left alone; if the ROLLBACK fails, the connection is still
// in a transaction and pgxpool destroys it on Release, which ends the transaction
// on the server.
func RollbackConn(ctx context.Context, c *pgx.Conn) {
	if c.IsClosed() || c.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackTimeout)
	defer cancel()
	_, _ = c.Exec(ctx, "ROLLBACK")
}

// Rollback rolls tx back (a no-op once it has committed or rolled back) even when
// ctx is already done (keeping ctx's values), for at most RollbackTimeout: on a
// silent network the answer never comes, and the connection is then closed
// instead, which ends the transaction on the server. For a deferred rollback.
func Rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// Millis renders d as the value of a PostgreSQL timeout setting (lock_timeout,
// idle_in_transaction_session_timeout, statement_timeout): whole milliseconds,
// rounded up, so that a positive d never becomes 0, which PostgreSQL reads as "no
// timeout".
func Millis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}
