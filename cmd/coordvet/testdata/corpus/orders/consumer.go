package orders

import (
	"context"

	"github.com/coordkit/coordkit/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// Consume dedupes a delivery in the inbox, in the effect's transaction, and
// acknowledges after the commit: an ack is not a publish.
//
//corpus:negative
func Consume(ctx context.Context, pool *pgxpool.Pool, in *outbox.Inbox, msg *nats.Msg) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := in.ProcessTx(ctx, tx, "billing", msg.Header.Get(outbox.HeaderEventID), func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, string(msg.Data))
		return err
	}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return msg.Ack()
}

// ConsumeOnce keeps a dedupe marker in Redis: SetNX on seen:<id> is not a lock.
//
//corpus:negative
func ConsumeOnce(ctx context.Context, rdb *redis.Client, pool *pgxpool.Pool, msg *nats.Msg) error {
	first, err := rdb.SetNX(ctx, "seen:"+msg.Header.Get(outbox.HeaderEventID), 1, 0).Result()
	if err != nil || !first {
		return err
	}
	_, err = pool.Exec(ctx, `UPDATE accounts SET balance = balance - 1 WHERE id = $1`, string(msg.Data))
	return err
}

// RepublishDeadLetter reads parked rows and publishes them: reads only.
//
//corpus:negative
func RepublishDeadLetter(ctx context.Context, pool *pgxpool.Pool, nc *nats.Conn) error {
	rows, err := pool.Query(ctx, `SELECT payload FROM parked_events LIMIT 10`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			return err
		}
		if err := nc.Publish("orders.replayed", p); err != nil {
			return err
		}
	}
	return rows.Err()
}
