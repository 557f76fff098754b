package good

import (
	"context"
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// commitOnly and publishOnly live in different functions: no dual write here,
// the relay pattern keeps them apart.
func commitOnly(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "insert into outbox values ($1)", "event"); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func publishOnly(ctx context.Context, cl *kgo.Client) error {
	if err := cl.Ping(ctx); err != nil {
		return err
	}
	return cl.ProduceSync(ctx, &kgo.Record{Topic: "orders"}).FirstErr()
}

func rollbackAndPublish(ctx context.Context, tx pgx.Tx, nc *nats.Conn) error {
	_ = tx.Rollback(ctx)
	return nc.Flush()
}

func sqlCommit(tx *sql.Tx) error { return tx.Commit() }
