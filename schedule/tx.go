package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// errHandlerEndsTx: a Handler called Commit or Rollback on the fire's
// transaction, which the scheduler ends itself (with the fire's record).
var errHandlerEndsTx = errors.New("schedule: a handler must not end the fire's transaction: return nil to commit it, an error to roll it back")

// fireTx is the transaction of one fire, a pgx.Tx whose BEGIN is not a round
// trip of its own: it is sent with the transaction's first statement (the
// fence's guard, pgfence.GuardTx) and the rider (the job row's lock and the
// fire's record) — one round trip — and the fire's record is sent with COMMIT
// — one more. Whatever the handler runs in between goes straight to the
// connection.
type fireTx struct {
	conn  *pgx.Conn
	tx    pgx.Tx // the transaction, once begun
	rider *rider
	done  bool // committed or rolled back
}

// rider is a statement sent right after the transaction's first one.
type rider struct {
	sql  string
	args []any
	dest []any
	err  error // its own, or the error that kept it from running
}

var _ pgx.Tx = (*fireTx)(nil)

// send begins the transaction with the statement sql and the rider in one
// batch, and returns the results positioned at sql's.
func (t *fireTx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	if sql != "" {
		b.Queue(sql, args...)
	}
	if t.rider != nil {
		b.Queue(t.rider.sql, t.rider.args...)
	}
	br := t.conn.SendBatch(ctx, b)
	t.tx = br.Tx()
	if _, err := br.Exec(); err != nil { // BEGIN
		t.finish(br, err)
		return nil, err
	}
	return br, nil
}

// finish reads the rider's result (or notes why it has none) and closes br.
func (t *fireTx) finish(br pgx.BatchResults, first error) error {
	if t.rider != nil {
		if first != nil && !errors.Is(first, pgx.ErrNoRows) {
			t.rider.err = fmt.Errorf("schedule: not run: %w", first)
		} else {
			t.rider.err = br.QueryRow().Scan(t.rider.dest...)
		}
	}
	return br.Close()
}

// begin begins the transaction with the rider alone, for a first statement
// that cannot ride with BEGIN (one round trip more, still correct).
func (t *fireTx) begin(ctx context.Context) error {
	if t.tx != nil {
		return nil
	}
	br, err := t.send(ctx, "", nil)
	if err != nil {
		return err
	}
	return t.finish(br, nil)
}

// QueryRow sends the first statement with BEGIN and the rider.
func (t *fireTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.tx != nil {
		return t.tx.QueryRow(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	return &firstRow{t: t, br: br}
}

// firstRow is the first statement's row; scanning it reads the rider too.
type firstRow struct {
	t  *fireTx
	br pgx.BatchResults
}

func (r *firstRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.t.finish(r.br, err); err == nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// Exec sends the first statement with BEGIN and the rider.
func (t *fireTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.tx != nil {
		return t.tx.Exec(ctx, sql, args...)
	}
	br, err := t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := t.finish(br, err); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *fireTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.tx.Query(ctx, sql, args...)
}

func (t *fireTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.begin(ctx); err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return t.tx.SendBatch(ctx, b)
}

func (t *fireTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.tx.CopyFrom(ctx, table, cols, src)
}

func (t *fireTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.tx.Prepare(ctx, name, sql)
}

// Begin starts a savepoint (pgx's pseudo nested transaction).
func (t *fireTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.tx.Begin(ctx)
}

func (t *fireTx) LargeObjects() pgx.LargeObjects {
	if t.tx == nil {
		return pgx.LargeObjects{} // unusable before the first statement, like an ended pgx.Tx's
	}
	return t.tx.LargeObjects()
}

func (t *fireTx) Conn() *pgx.Conn { return t.conn }

// Commit and Rollback are the scheduler's: a handler gets errHandlerEndsTx.
func (t *fireTx) Commit(context.Context) error   { return errHandlerEndsTx }
func (t *fireTx) Rollback(context.Context) error { return errHandlerEndsTx }

// rollback ends the transaction, if one was begun and has not ended, bounded
// by a second past ctx's end.
func (t *fireTx) rollback(ctx context.Context) {
	if t.tx == nil || t.done {
		return
	}
	t.done = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = t.tx.Rollback(ctx) // a failed rollback closes the connection: nothing committed
}

// errCommitUnknown marks a COMMIT whose outcome the connection did not tell.
var errCommitUnknown = errors.New("schedule: connection failed during COMMIT: the fire may have committed")

// recordAndCommit sends the record statement and COMMIT in one round trip.
// A record that fails aborts the transaction before COMMIT runs; it returns
// that error (the transaction rolled back). When the connection fails, or ctx
// ends, with COMMIT sent, it returns an error matching errCommitUnknown.
func (t *fireTx) recordAndCommit(ctx context.Context, sql string, args ...any) error {
	if err := t.begin(ctx); err != nil {
		return err
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("commit")
	br := t.tx.SendBatch(ctx, b)
	_, recErr := br.Exec()
	tag, comErr := br.Exec()
	closeErr := br.Close()
	var pgErr *pgconn.PgError
	switch {
	case recErr != nil && errors.As(recErr, &pgErr):
		t.rollback(ctx)
		return recErr
	case recErr == nil && comErr == nil && closeErr == nil && tag.String() == "COMMIT":
		t.done = true
		return nil
	case recErr == nil && comErr == nil && closeErr == nil:
		t.done = true // the server answered ROLLBACK: nothing committed
		return fmt.Errorf("schedule: COMMIT answered %q", tag.String())
	case comErr != nil && errors.As(comErr, &pgErr):
		t.rollback(ctx)
		return comErr
	}
	t.done = true
	return fmt.Errorf("%w: %w", errCommitUnknown, errors.Join(recErr, comErr, closeErr))
}
