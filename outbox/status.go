package outbox

import (
	"context"
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
	// ParkedKeys lists the keys with a parked event, oldest parked first: the
	// first StatusParkedKeys of ParkedKeyCount.
	ParkedKeys []ParkedKey
	// ParkedKeyCount counts the keys with a parked event.
	ParkedKeyCount int64
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

// StatusParkedKeys is the most keys Status.ParkedKeys lists (the oldest parked);
// ParkedKeyCount counts them all and ParkedList pages through their events.
const StatusParkedKeys = 100

// Status reads the outbox's backlog, publish lag and parked keys (see Status).
// It is read-only and takes no lock: three queries, which ctx cancels.
// ParkedKeys is bounded (StatusParkedKeys), so its cost does not grow with the
// number of stopped keys beyond one grouping of the dead-letter table.
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
	// Group the parked rows once; count the blocked followers of the listed keys only.
	rows, err := db.Query(ctx, `WITH k AS (SELECT aggregateid, count(*) AS n, min(parked_at) AS at FROM `+o.dead+` GROUP BY aggregateid),
  top AS (SELECT * FROM k ORDER BY at, aggregateid LIMIT $1)
SELECT top.aggregateid, top.n, top.at,
  (SELECT count(*) FROM `+o.table+` o WHERE o.aggregateid = top.aggregateid AND o.published_at IS NULL),
  (SELECT count(*) FROM k)
FROM top ORDER BY top.at, top.aggregateid`, StatusParkedKeys)
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	s.ParkedKeys, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (ParkedKey, error) {
		var k ParkedKey
		return k, r.Scan(&k.Key, &k.Parked, &k.ParkedAt, &k.Blocked, &s.ParkedKeyCount)
	})
	if err != nil {
		return Status{}, fmt.Errorf("outbox: status: %w", err)
	}
	return s, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
