package idempotency

import (
	"context"
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errFnEndsTx is what fn gets when it tries to commit or roll back Do's transaction.
var errFnEndsTx = errors.New("idempotency: fn must not commit or roll back Do's transaction; return from fn instead")

// connTx is the pgx.Tx that Do hands to fn: Do's own READ COMMITTED transaction on
// one pooled connection. Do begins it in the same round trip as the claim
// (pgx.Conn.BeginTx would spend a round trip of its own on BEGIN), so every method
// runs straight on the connection. Begin makes a savepoint, as pgx's own Tx does;
// Commit and Rollback of the transaction itself are refused — Do ends it, together
// with the key row.
type connTx struct {
	conn      *pgx.Conn
	savepoint int64 // 0: Do's transaction; n: savepoint sp_n
	last      *int64
	closed    bool
}

func newConnTx(c *pgx.Conn) *connTx { return &connTx{conn: c, last: new(int64)} }

// Begin starts a pseudo nested transaction (a savepoint).
func (t *connTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	*t.last++
	sp := &connTx{conn: t.conn, savepoint: *t.last, last: t.last}
	if _, err := t.conn.Exec(ctx, "savepoint sp_"+strconv.FormatInt(sp.savepoint, 10)); err != nil {
		return nil, err
	}
	return sp, nil
}

// Commit releases a savepoint; on Do's transaction itself it returns an error.
func (t *connTx) Commit(ctx context.Context) error { return t.end(ctx, "release savepoint sp_") }

// Rollback rolls back to a savepoint; on Do's transaction itself it returns an error.
func (t *connTx) Rollback(ctx context.Context) error { return t.end(ctx, "rollback to savepoint sp_") }

func (t *connTx) end(ctx context.Context, sql string) error {
	if t.savepoint == 0 {
		return errFnEndsTx
	}
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	_, err := t.conn.Exec(ctx, sql+strconv.FormatInt(t.savepoint, 10))
	return err
}

// CopyFrom runs COPY FROM on the transaction's connection.
func (t *connTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

// SendBatch sends b on the transaction's connection.
func (t *connTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects returns the large-object API inside this transaction. pgx builds it
// only on a Tx of its own, so this costs one round trip (an empty query that opens
// pgx's view of the transaction already in progress); on a broken connection the
// returned value's methods fail as the connection does.
func (t *connTx) LargeObjects() pgx.LargeObjects {
	tx, err := t.conn.BeginTx(context.Background(), pgx.TxOptions{BeginQuery: ";"})
	if err != nil {
		return pgx.LargeObjects{}
	}
	return tx.LargeObjects()
}

// Prepare prepares a statement on the transaction's connection.
func (t *connTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Exec runs sql in the transaction.
func (t *connTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs sql in the transaction.
func (t *connTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs sql in the transaction.
func (t *connTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// Conn returns the connection the transaction runs on.
func (t *connTx) Conn() *pgx.Conn { return t.conn }
