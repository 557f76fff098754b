package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/saga"
)

// orderSaga is the data of the order-placement saga.
type orderSaga struct {
	Order      string
	BadAddress bool // the address check fails: a business failure before the pivot
}

// runSaga: an order-placement saga — reserve stock, authorize the card (both
// compensatable), verify the address (compensatable, the likeliest failure before
// the point of no return), capture the payment (the pivot), send the confirmation
// (retried forward only). One order fails its third step: the first two are
// compensated, newest first. Another passes the pivot and its confirmation fails
// twice: it is retried forward, never compensated.
func runSaga(ctx context.Context, e *env) (string, bool) {
	if _, err := e.pool.Exec(ctx, `CREATE TABLE ledger (seq bigserial PRIMARY KEY, order_id text NOT NULL, entry text NOT NULL)`); err != nil {
		return err.Error(), false
	}
	barrier, err := saga.NewBarrier(saga.BarrierConfig{})
	if err != nil {
		return err.Error(), false
	}
	if err := barrier.Migrate(ctx, e.pool); err != nil {
		return "migrate: " + err.Error(), false
	}
	// Each participant applies its effect through the barrier, in its own
	// transaction, keyed by the saga's idempotency key.
	participant := func(entry string, compensate bool) saga.Action[orderSaga] {
		return func(ctx context.Context, sc saga.StepContext, d *orderSaga) error {
			return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
				apply := func(ctx context.Context, tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `INSERT INTO ledger (order_id, entry) VALUES ($1, $2)`, d.Order, entry)
					return err
				}
				var err error
				if compensate {
					_, err = barrier.CompensateTx(ctx, tx, sc.IdempotencyKey(), apply)
				} else {
					_, err = barrier.ActionTx(ctx, tx, sc.IdempotencyKey(), apply)
				}
				return err
			})
		}
	}
	var confirmFailures atomic.Int32
	def, err := saga.New("place-order",
		saga.Compensatable("reserve-stock", participant("stock reserved", false), participant("stock released", true)),
		saga.Compensatable("authorize-card", participant("card authorized", false), participant("authorization voided", true)),
		saga.Compensatable("verify-address", func(ctx context.Context, sc saga.StepContext, d *orderSaga) error {
			if d.BadAddress {
				return saga.Fail(errors.New("address does not exist"))
			}
			return participant("address verified", false)(ctx, sc, d)
		}, participant("address check undone", true)),
		saga.Pivot("capture-payment", participant("payment captured", false)),
		saga.Retriable("send-confirmation", func(ctx context.Context, sc saga.StepContext, d *orderSaga) error {
			if sc.Attempt() <= 2 {
				confirmFailures.Add(1)
				return errors.New("mail service unavailable")
			}
			return participant("confirmation sent", false)(ctx, sc, d)
		}),
	)
	if err != nil {
		return err.Error(), false
	}
	client, err := saga.NewClient(e.pool, saga.Config{
		Backoff:      coord.Backoff{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond},
		PollInterval: 100 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err.Error(), false
	}
	defer client.Close()
	if err := client.Migrate(ctx, e.pool); err != nil {
		return "migrate: " + err.Error(), false
	}
	if err := client.Register(def); err != nil {
		return err.Error(), false
	}
	rctx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(rctx) }()
	defer func() { stop(); <-ran }()

	bad, err := saga.Start(ctx, client, def, orderSaga{Order: "ord-bad", BadAddress: true}, nil)
	if err != nil {
		return err.Error(), false
	}
	good, err := saga.Start(ctx, client, def, orderSaga{Order: "ord-good"}, nil)
	if err != nil {
		return err.Error(), false
	}
	step("saga place-order: reserve-stock, authorize-card, verify-address (compensatable) → capture-payment (pivot) → send-confirmation (retriable)")
	final := map[string]saga.Info{}
	deadline := time.Now().Add(30 * time.Second)
	for len(final) < 2 && time.Now().Before(deadline) {
		for _, id := range []string{bad, good} {
			if info, err := client.SagaGet(ctx, id); err == nil && info.State.Terminal() {
				final[id] = info
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(final) < 2 {
		return "sagas did not finish within 30 s", false
	}
	ledger := func(order string) []string {
		rows, _ := e.pool.Query(ctx, `SELECT entry FROM ledger WHERE order_id = $1 ORDER BY seq`, order)
		entries, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		return entries
	}
	badLedger, goodLedger := ledger("ord-bad"), ledger("ord-good")
	step("ord-bad: verify-address failed (%s) → %s; participant ledger: %v", final[bad].Failure, final[bad].State, badLedger)
	step("ord-good: confirmation failed %d times after the pivot, retried forward → %s; ledger: %v", confirmFailures.Load(), final[good].State, goodLedger)

	wantBad := []string{"stock reserved", "card authorized", "authorization voided", "stock released"}
	wantGood := []string{"stock reserved", "card authorized", "address verified", "payment captured", "confirmation sent"}
	compensatedInOrder := slices.Equal(badLedger, wantBad)
	forwardOnly := slices.Equal(goodLedger, wantGood)
	verdict := fmt.Sprintf("ord-bad %s with its 2 completed steps undone newest first: %v; ord-good %s after %d forward retries past the pivot, 0 compensations: %v",
		final[bad].State, compensatedInOrder, final[good].State, confirmFailures.Load(), forwardOnly)
	return verdict, final[bad].State == saga.StateCompensated && compensatedInOrder &&
		final[good].State == saga.StateCompleted && forwardOnly && confirmFailures.Load() == 2
}
