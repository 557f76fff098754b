package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ParkedEvent is an event in the dead-letter table. While it is there, later
// events of its key are not published.
type ParkedEvent struct {
	ID        ID
	Seq       int64
	Topic     string
	Key       string
	Type      string
	Payload   []byte
	Headers   map[string]string
	CreatedAt time.Time
	Attempts  int
	LastError string
	ParkedAt  time.Time
}

// Parked lists up to limit parked events in outbox order. It blocks for one query.
func (o *Outbox) Parked(ctx context.Context, db DBTX, limit int) ([]ParkedEvent, error) {
	rows, err := db.Query(ctx, o.sql.parkedList, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: parked: %w", err)
	}
	out, err := scanParked(rows)
	if err != nil {
		return nil, fmt.Errorf("outbox: parked: %w", err)
	}
	return out, nil
}

// scanParked reads rows of parkedCols and closes them.
func scanParked(rows pgx.Rows) ([]ParkedEvent, error) {
	defer rows.Close()
	var out []ParkedEvent
	for rows.Next() {
		var p ParkedEvent
		var id, payload, headers string
		if err := rows.Scan(&id, &p.Seq, &p.Topic, &p.Key, &p.Type, &payload, &headers, &p.CreatedAt, &p.Attempts, &p.LastError, &p.ParkedAt); err != nil {
			return nil, err
		}
		var err error
		if p.ID, err = ParseID(id); err != nil {
			return nil, err
		}
		p.Payload = []byte(payload)
		_ = json.Unmarshal([]byte(headers), &p.Headers)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Requeue moves a parked event back into the outbox at its original position
// with its attempts reset: it becomes the head of its key again and is published
// before the key's later events. It waits for the relay driving the key (if any)
// to finish its batch. It returns an error matching ErrNotParked if id is not
// parked.
func (o *Outbox) Requeue(ctx context.Context, db Beginner, id ID) error {
	return o.operate(ctx, db, id, o.sql.requeue)
}

// Discard deletes a parked event for good; the key's later events then flow. It
// returns an error matching ErrNotParked if id is not parked.
func (o *Outbox) Discard(ctx context.Context, db Beginner, id ID) error {
	return o.operate(ctx, db, id, o.sql.discard)
}

func (o *Outbox) operate(ctx context.Context, db Beginner, id ID, q string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		var key string
		if err := tx.QueryRow(ctx, o.sql.parkedKey, id.String()).Scan(&key); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: %s", ErrNotParked, id)
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
			return fmt.Errorf("%w: %s", ErrNotParked, id)
		}
		return nil
	})
}

// Prune deletes published rows older than Config.Retention, in statements of at
// most Config.PruneBatch rows, until none is left; it returns how many it
// deleted. Relays call it every Config.PruneInterval; call it yourself if no relay
// runs. ctx cancels it between (or during) statements.
func (o *Outbox) Prune(ctx context.Context, db DBTX) (int64, error) {
	var total int64
	for {
		tag, err := db.Exec(ctx, o.sql.prune, o.cfg.Retention.Milliseconds(), o.cfg.PruneBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(o.cfg.PruneBatch) {
			return total, nil
		}
	}
}
