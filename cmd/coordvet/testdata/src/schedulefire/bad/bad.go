package bad

import (
	"context"
	"net/http"
	"strings"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/schedule"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
)

var (
	pool   *pgxpool.Pool
	nc     *nats.Conn
	psp    *http.Client
	leader coord.Token
)

// A write through the pool: outside the fire's transaction, without its key.
var billing = schedule.Job{Name: "billing", Cron: "0 9 1 * *",
	Handler: func(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
		_, err := pool.Exec(ctx, `INSERT INTO invoices (job) VALUES ($1)`, f.Job) // want `schedulefire: handler's autocommit write \(Exec\) ignores the fire's key and token`
		return err
	}}

// A publish and a payment call that carry nothing of the fire.
func remind(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
	if err := nc.Publish("reminders", []byte("due")); err != nil { // want `schedulefire: handler's publish \(Publish\) ignores the fire's key and token`
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", "https://psp.example/charges", strings.NewReader("{}"))
	if err != nil {
		return err
	}
	req.Header.Set("X-Attempt", string(rune('0'+f.Attempt)))
	_, err = psp.Do(req) // want `schedulefire: handler's HTTP request \(Do\) ignores the fire's key and token`
	return err
}

// A fenced transaction of its own, with another token than the fire's.
func sweep(ctx context.Context, tx pgx.Tx, f *schedule.Fire) error {
	return pgfence.Exec(ctx, pool, leader, func(ctx context.Context, tx pgx.Tx) error { // want `schedulefire: handler's commit \(Exec\) ignores the fire's key and token`
		_, err := tx.Exec(ctx, `DELETE FROM sessions`)
		return err
	})
}
