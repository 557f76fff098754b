package good

import (
	"context"
	"net/http"
	"strings"

	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

var (
	pool *pgxpool.Pool
	nc   *nats.Conn
	psp  *http.Client
)

// Writes with the fire's transaction: fenced and recorded with the fire.
var billing = schedule.Job{Name: "billing", Cron: "0 9 1 * *",
	Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
		_, err := tx.Exec(ctx, `INSERT INTO invoices (job) VALUES ($1)`, f.Job)
		return err
	}}

// The key reaches the receivers: the payment provider's header, the message,
// a write keyed on it.
func charge(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
	key := f.Key()
	req, err := http.NewRequestWithContext(ctx, "POST", "https://psp.example/charges", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", key)
	if _, err := psp.Do(req); err != nil {
		return err
	}
	if err := nc.Publish("charged", []byte(key)); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `INSERT INTO receipts (key) VALUES ($1) ON CONFLICT DO NOTHING`, f.ID.Key())
	return err
}

// Another transaction fenced with the fire's token; reads through the pool.
func sweep(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
	if _, err := pool.Query(ctx, `SELECT id FROM sessions`); err != nil {
		return err
	}
	return pgfence.Exec(ctx, pool, f.Token, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM sessions`)
		return err
	})
}

// Not a handler: no *schedule.Fire.
func cleanup(ctx context.Context) error {
	_, err := pool.Exec(ctx, `DELETE FROM tmp`)
	return err
}
