package outbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coordkit/coordkit/internal/pgerr"
)

// record marks (or deletes) the published seqs, records the failures and
// commits; it returns the publish lags of the marked rows and whether the
// failures fell back to being counted only (none parked). Without failures it is
// one round trip. With next, the next batch's claim rides with the COMMIT (its
// BEGIN, lease and claim follow it in the same round trip, with a snapshot taken
// after it): when the COMMIT went through and the claim ran, nc is that claim, in
// the new transaction conn is then in; otherwise nc is nil and conn may be left
// in a failed transaction for the caller to roll back.
//
// Failures are recorded in a second round trip, behind a savepoint taken after
// the marks: if PostgreSQL refuses to record one (a constraint, a trigger, a
// dead-letter table that rejects the row), the marks still commit and every
// failing event still gets its attempt counted and its backoff, with a fixed
// error text instead — so a failure to record a failure neither republishes the
// other keys nor lets the failing key loop without ever reaching MaxAttempts.
func (r *Relay) record(ctx context.Context, conn *pgx.Conn, ok []int64, failures []failure, next bool) (lags []seqLag, fellBack bool, nc *claimQuery, err error) {
	b := &pgx.Batch{}
	if len(ok) > 0 {
		q := r.o.sql.markPublished
		if r.cfg.DeleteOnPublish {
			q = r.o.sql.deletePublished
		}
		b.Queue(q, ok).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var l seqLag
				if err := rows.Scan(&l.seq, &l.ms); err != nil {
					return err
				}
				lags = append(lags, l)
			}
			return rows.Err()
		})
	}
	committed := false
	commitAndClaim := func(b *pgx.Batch) {
		b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
			committed = tag.String() == "COMMIT" // "ROLLBACK": the transaction had failed
			return nil
		})
		if next {
			nc = r.queueClaim(b)
		}
	}
	if len(failures) == 0 {
		commitAndClaim(b)
		err = conn.SendBatch(ctx, b).Close()
	} else {
		b.Queue("SAVEPOINT record_failures")
		if err = conn.SendBatch(ctx, b).Close(); err == nil {
			b = &pgx.Batch{}
			for _, f := range failures {
				if f.park {
					b.Queue(r.o.sql.park, f.seq, f.errText)
				} else {
					b.Queue(r.o.sql.fail, f.seq, f.delay.Milliseconds(), f.errText)
				}
			}
			commitAndClaim(b)
			if err = conn.SendBatch(ctx, b).Close(); err != nil && !committed && conn.PgConn().TxStatus() == 'E' {
				fellBack, nc = true, nil
				if err = r.recordFallback(ctx, conn, failures, err); err == nil {
					committed = conn.PgConn().TxStatus() == 'I'
				}
			}
		}
	}
	if !committed {
		if err == nil {
			err = errors.New("transaction did not commit")
		}
		return nil, false, nil, fmt.Errorf("mark and commit: %w", err)
	}
	if err != nil {
		// Committed; the claim that rode with the COMMIT failed: the next batch
		// claims again.
		nc = nil
	}
	return lags, fellBack, nc, nil
}

// recordFallback runs after PostgreSQL refused to record the failures (cause):
// back to the savepoint (the marks stay), count each failing event's attempt
// with a fixed, storable text, commit. If even that is refused, it commits the
// marks alone.
func (r *Relay) recordFallback(ctx context.Context, conn *pgx.Conn, failures []failure, cause error) error {
	r.cfg.Logger.ErrorContext(ctx, "outbox relay: could not record publish failures; counting the attempts without their error text",
		"table", r.cfg.Table, "err", cause)
	// Without arguments, Exec uses the simple protocol: nothing is prepared while
	// the transaction is aborted.
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT record_failures"); err != nil {
		return err
	}
	text := "outbox: the publisher's error could not be recorded (SQLSTATE " + cmp.Or(pgerr.Code(cause), "unknown") + "); see the relay's log"
	b := &pgx.Batch{}
	for _, f := range failures {
		b.Queue(r.o.sql.fail, f.seq, f.delay.Milliseconds(), text)
	}
	b.Queue("COMMIT")
	err := conn.SendBatch(ctx, b).Close()
	if err == nil || conn.PgConn().TxStatus() != 'E' {
		return err
	}
	r.cfg.Logger.ErrorContext(ctx, "outbox relay: could not count publish failures; committing the marks alone",
		"table", r.cfg.Table, "err", err)
	if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT record_failures"); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "COMMIT")
	return err
}
