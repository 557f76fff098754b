package orders

import (
	"context"
	"log/slog"

	"github.com/coordkit/coordkit/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

//corpus:negative
func (s *Service) ListAndProduce(ctx context.Context) error {
	rows, err := s.Pool.Query(ctx, `SELECT id FROM orders WHERE shipped = false`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		s.Kafka.Produce(ctx, &kgo.Record{Topic: "reminders", Key: []byte(id)}, nil)
	}
	return rows.Err()
}

//corpus:negative
func (s *Service) EnqueueBatch(ctx context.Context, tx pgx.Tx, evs []outbox.Event) error {
	if _, err := s.Outbox.EnqueueBatchTx(ctx, tx, evs); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

//corpus:negative
func (s *Service) CommitThenLog(ctx context.Context, tx pgx.Tx, id string) error {
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	slog.Info("order committed", "id", id)
	return s.Kafka.Ping(ctx)
}
