package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The operator's changes to parked events: one at a time in a transaction of
// their own, or many in the caller's (coordctl's bulk requeue and discard,
// compared with what the operator was shown and audited in the same commit).

// ParkedRequeue moves a parked event back into the outbox at its original
// position with its attempts reset: it becomes the head of its key again and is
// published before the key's later events. It waits for the relay driving the
// key (if any) to finish its batch. It returns an error matching ErrNotFound if
// id is not parked.
func (o *Outbox) ParkedRequeue(ctx context.Context, db Beginner, id ID) error {
	return o.operate(ctx, db, id, o.sql.requeue)
}

// ParkedDiscard deletes a parked event for good; the key's later events then
// flow. It returns an error matching ErrNotFound if id is not parked.
func (o *Outbox) ParkedDiscard(ctx context.Context, db Beginner, id ID) error {
	return o.operate(ctx, db, id, o.sql.discard)
}

func (o *Outbox) operate(ctx context.Context, db Beginner, id ID, q string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var key string
		if err := tx.QueryRow(ctx, o.sql.parkedKey, id.String()).Scan(&key); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: parked event %s", ErrNotFound, id)
			}
			return fmt.Errorf("outbox: %w", err)
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, hashtext($2))", o.relayClass, key); err != nil {
			return fmt.Errorf("outbox: lock key: %w", err)
		}
		tag, err := tx.Exec(ctx, q, id.String())
		if err != nil {
			return fmt.Errorf("outbox: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: parked event %s", ErrNotFound, id)
		}
		return nil
	})
}

// ParkedLockTx reads the parked event id and locks it until tx ends, so that a
// ParkedRequeueTx or ParkedDiscardTx later in tx acts on exactly the event it
// returned (an operator's compare-and-set: coordctl compares it with what it
// showed). It takes the locks ParkedRequeue and ParkedDiscard take, in their
// order (the key's relay lock, then the row), so two operators acting on one key
// queue up instead of deadlocking; like them it waits for a relay driving the key
// to finish its batch. It returns an error matching ErrNotFound if id is not
// parked; ctx cancels the wait.
func (o *Outbox) ParkedLockTx(ctx context.Context, tx pgx.Tx, id ID) (ParkedEvent, error) {
	var key string
	if err := tx.QueryRow(ctx, o.sql.parkedKey, id.String()).Scan(&key); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ParkedEvent{}, fmt.Errorf("%w: parked event %s", ErrNotFound, id)
		}
		return ParkedEvent{}, fmt.Errorf("outbox: lock parked %s: %w", id, err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, hashtext($2))", o.relayClass, key); err != nil {
		return ParkedEvent{}, fmt.Errorf("outbox: lock key: %w", err)
	}
	rows, err := tx.Query(ctx, o.sql.parkedOne, id.String())
	if err != nil {
		return ParkedEvent{}, fmt.Errorf("outbox: lock parked %s: %w", id, err)
	}
	got, err := scanParked(rows)
	if err != nil {
		return ParkedEvent{}, fmt.Errorf("outbox: lock parked %s: %w", id, err)
	}
	if len(got) == 0 { // requeued or discarded while we waited for the key
		return ParkedEvent{}, fmt.Errorf("%w: parked event %s", ErrNotFound, id)
	}
	return got[0], nil
}

// ParkedLockAllTx is ParkedLockTx for many events at once, in a constant number
// of statements: it takes the relay locks of their keys (in one order every
// caller shares, so two bulk operators queue up instead of deadlocking), then
// locks and returns the events still parked, in outbox order. An id that is not
// parked (or was requeued or discarded while it waited) is missing from the
// result; it is not an error. ctx cancels the wait.
func (o *Outbox) ParkedLockAllTx(ctx context.Context, tx pgx.Tx, ids []ID) ([]ParkedEvent, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	idText := idStrings(ids)
	if err := o.lockKeysOf(ctx, tx, idText); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT `+o.parkedCols(0)+` FROM `+o.dead+` WHERE id = ANY($1::uuid[]) ORDER BY seq FOR UPDATE`, idText)
	if err != nil {
		return nil, fmt.Errorf("outbox: lock parked events: %w", err)
	}
	got, err := scanParked(rows)
	if err != nil {
		return nil, fmt.Errorf("outbox: lock parked events: %w", err)
	}
	return got, nil
}

// ParkedRequeueTx is ParkedRequeue for many events in the caller's
// transaction (they flow once tx commits): it takes their keys' relay locks as
// ParkedLockAllTx does and moves every one of ids still parked back into the
// outbox in one statement, returning how many it moved. Ids not parked are
// skipped. On error, roll tx back.
func (o *Outbox) ParkedRequeueTx(ctx context.Context, tx pgx.Tx, ids []ID) (int64, error) {
	return o.operateAll(ctx, tx, ids, `WITH m AS (DELETE FROM `+o.dead+` WHERE id = ANY($1::uuid[]) RETURNING *)
INSERT INTO `+o.table+` (seq, `+cols+`, created_at)
OVERRIDING SYSTEM VALUE
SELECT seq, `+cols+`, created_at FROM m`)
}

// ParkedDiscardTx is ParkedDiscard for many events in the caller's transaction:
// it deletes every one of ids still parked (taking their keys' relay locks
// first) and returns how many it deleted. On error, roll tx back.
func (o *Outbox) ParkedDiscardTx(ctx context.Context, tx pgx.Tx, ids []ID) (int64, error) {
	return o.operateAll(ctx, tx, ids, `DELETE FROM `+o.dead+` WHERE id = ANY($1::uuid[])`)
}

func (o *Outbox) operateAll(ctx context.Context, tx pgx.Tx, ids []ID, q string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	idText := idStrings(ids)
	if err := o.lockKeysOf(ctx, tx, idText); err != nil {
		return 0, err
	}
	tag, err := tx.Exec(ctx, q, idText)
	if err != nil {
		return 0, fmt.Errorf("outbox: parked events: %w", err)
	}
	return tag.RowsAffected(), nil
}

// lockKeysOf takes the relay locks of the keys of the parked events ids, in
// the order of their lock keys (the subquery's order, which the outer scan
// keeps: the locks are taken one after another in it).
func (o *Outbox) lockKeysOf(ctx context.Context, tx pgx.Tx, ids []string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, k.h) FROM (
  SELECT DISTINCT hashtext(aggregateid) AS h FROM `+o.dead+` WHERE id = ANY($2::uuid[]) ORDER BY 1) k`, o.relayClass, ids)
	if err != nil {
		return fmt.Errorf("outbox: lock keys: %w", err)
	}
	return nil
}

func idStrings(ids []ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// Parked lists up to limit parked events in outbox order. It blocks for one query.
//
// Deprecated: use ParkedList, which pages, filters and searches.
func (o *Outbox) Parked(ctx context.Context, db DBTX, limit int) ([]ParkedEvent, error) {
	res, err := o.ParkedList(ctx, db, &ParkedListOpts{Limit: limit})
	return res.Events, err
}

// Requeue is ParkedRequeue.
//
// Deprecated: use ParkedRequeue.
func (o *Outbox) Requeue(ctx context.Context, db Beginner, id ID) error {
	return o.ParkedRequeue(ctx, db, id)
}

// Discard is ParkedDiscard.
//
// Deprecated: use ParkedDiscard.
func (o *Outbox) Discard(ctx context.Context, db Beginner, id ID) error {
	return o.ParkedDiscard(ctx, db, id)
}

// LockParkedTx is ParkedLockTx.
//
// Deprecated: use ParkedLockTx.
func (o *Outbox) LockParkedTx(ctx context.Context, tx pgx.Tx, id ID) (ParkedEvent, error) {
	return o.ParkedLockTx(ctx, tx, id)
}
