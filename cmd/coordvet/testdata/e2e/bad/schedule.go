package bad

import (
	"context"

	"github.com/coordkit/coordkit/schedule"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A monthly job whose invoice is written through the pool: outside the fire's
// transaction, keyed on nothing of the fire.
func MonthlyInvoices(pool *pgxpool.Pool) schedule.Job {
	return schedule.Job{Name: "invoices", Cron: "0 9 1 * *",
		Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
			_, err := pool.Exec(ctx, `INSERT INTO invoices (month) VALUES (date_trunc('month', now()))`) // e2e: schedulefire
			return err
		}}
}
