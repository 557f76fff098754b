package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Status is the outbox as an operator sees it (coordctl outbox status): what waits
// to be published, how late publication runs, and which keys are stopped by a
// parked event.
type Status struct {
	// Pending counts events not yet published, parked keys' followers included.
	Pending int64
	// OldestPendingAge is the age of the oldest pending event (0: none): the lag
	// an event enqueued now would at least see if the backlog drains in order.
	OldestPendingAge time.Duration
	// PublishLagP99 is the 99th percentile of publish lag (published_at minus
	// created_at) of the events published in the last StatusWindow; 0 when none
	// was published then or the relay deletes rows on publish (DeleteOnPublish).
	PublishLagP99 time.Duration
	// PublishedInWindow counts the events published in the last StatusWindow
	// (mark mode only).
	PublishedInWindow int64
	// Parked counts events in the dead-letter table.
	Parked int64
	// ParkedKeys lists every key with a parked event, oldest parked first.
	ParkedKeys []ParkedKey
}

// ParkedKey is one key stopped by parked events.
type ParkedKey struct {
	Key      string
	Parked   int64     // its events in the dead-letter table
	Blocked  int64     // its pending events waiting behind them
	ParkedAt time.Time // when its oldest parked event was parked
}

// StatusWindow is the window of Status.PublishLagP99 and PublishedInWindow.
const StatusWindow = 5 * time.Minute

// Status reads the outbox's backlog, publish lag and parked keys (see Status).
// It is read-only and takes no lock: three queries, which ctx cancels.
func (o *Outbox) Status(ctx context.Context, db DBTX) (Status, error) {
	var s Status
	var oldest, p99 float64
	if err := db.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM `+o.table+` WHERE published_at IS NULL),
  coalesce((SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 FROM `+o.table+`
    WHERE published_at IS NULL ORDER BY seq LIMIT 1), 0),
  (SELECT count(*) FROM `+o.dead+`)`).Scan(&s.Pending, &oldest, &s.Parked); err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	if err := db.QueryRow(ctx, `SELECT count(*), coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY
    extract(epoch FROM published_at - created_at)::float8), 0)
  FROM `+o.table+` WHERE published_at > clock_timestamp() - $1::float8 * interval '1 second'`,
		StatusWindow.Seconds()).Scan(&s.PublishedInWindow, &p99); err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	s.OldestPendingAge, s.PublishLagP99 = seconds(oldest), seconds(p99)
	rows, err := db.Query(ctx, `SELECT d.aggregateid, count(*), min(d.parked_at),
    (SELECT count(*) FROM `+o.table+` o WHERE o.aggregateid = d.aggregateid AND o.published_at IS NULL)
  FROM `+o.dead+` d GROUP BY d.aggregateid ORDER BY min(d.parked_at), d.aggregateid`)
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	s.ParkedKeys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedKey, error) {
		var k ParkedKey
		return k, r.Scan(&k.Key, &k.Parked, &k.ParkedAt, &k.Blocked)
	})
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	return s, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// LockParkedTx reads the parked event id and locks it until tx ends, so that a
// Requeue or Discard later in tx acts on exactly the event it returned (an
// operator's compare-and-set: coordctl compares it with what it showed). It takes
// the locks Requeue and Discard take, in their order (the key's relay lock, then
// the row), so two operators acting on one key queue up instead of deadlocking;
// like them it waits for a relay driving the key to finish its batch. It returns
// an error matching ErrNotParked if id is not parked; ctx cancels the wait.
func (o *Outbox) LockParkedTx(ctx context.Context, tx pgx.Tx, id ID) (ParkedEvent, error) {
	var key string
	if err := tx.QueryRow(ctx, o.sql.parkedKey, id.String()).Scan(&key); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return ParkedEvent{}, fmt.Errorf("%w: %s", ErrNotParked, id)
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
		return ParkedEvent{}, fmt.Errorf("%w: %s", ErrNotParked, id)
	}
	return got[0], nil
}
