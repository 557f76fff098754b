package saga_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/saga"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// placement is the data of an order-placement saga.
type placement struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

// An order placement: reserve stock and authorise the card (both undoable), then
// the pivot — capture the payment — and only then the forward-only steps.
func Example() {
	ctx := context.Background()
	pool, dropSchema := coordtest.ExamplePostgres()
	defer dropSchema()
	// The participant's side: its barrier table, in its own database (here the same).
	barrier, err := saga.NewBarrier(saga.BarrierConfig{})
	if err != nil {
		panic(err)
	}
	if err := barrier.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	// A participant call: its effect and the barrier row in one transaction, so a
	// duplicate, a null compensation or a hanging action does nothing.
	type barrierOp func(context.Context, pgx.Tx, string, func(context.Context, pgx.Tx) error) (saga.Outcome, error)
	participant := func(op barrierOp, sql string) saga.Action[placement] {
		return func(ctx context.Context, sc saga.StepContext, p *placement) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err // technical: retried with backoff
			}
			defer tx.Rollback(ctx)
			if _, err := op(ctx, tx, sc.IdempotencyKey(), func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, sql) // the participant's own writes
				return err
			}); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
	}
	effect := func(string) saga.Action[placement] { return participant(barrier.ActionTx, "SELECT 1") }
	undo := func(string) saga.Action[placement] { return participant(barrier.CompensateTx, "SELECT 1") }
	def, err := saga.New("place-order",
		saga.Compensatable("reserve-stock", effect("reserve"), undo("release")),
		saga.Compensatable("authorize-card", func(ctx context.Context, sc saga.StepContext, p *placement) error {
			if p.Amount > 1000 {
				return saga.Fail(errors.New("card declined")) // business failure: compensate
			}
			return sc.SetOutput("auth-" + p.OrderID)
		}, undo("void")),
		saga.Pivot("capture-payment", func(ctx context.Context, sc saga.StepContext, p *placement) error {
			var auth string
			return sc.Output("authorize-card", &auth) // read an earlier step's output
		}),
		saga.Retriable("send-confirmation", effect("email")),
	)
	if err != nil {
		panic(err)
	}
	c, err := saga.NewClient(pool, saga.Config{PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	if err := c.Register(def); err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	defer func() { stop(); <-done }()

	ok, err := saga.Start(ctx, c, def, placement{OrderID: "o-1", Amount: 30}, &saga.StartOpts{ID: "o-1"})
	if err != nil {
		panic(err)
	}
	declined, err := saga.Start(ctx, c, def, placement{OrderID: "o-2", Amount: 5000}, &saga.StartOpts{ID: "o-2"})
	if err != nil {
		panic(err)
	}
	fmt.Println(waitTerminal(ctx, c, ok))
	fmt.Println(waitTerminal(ctx, c, declined))
	// Output:
	// completed
	// compensated
}

func waitTerminal(ctx context.Context, c *saga.Client, id string) saga.State {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if i, err := c.Get(ctx, id); err == nil && (i.State.Terminal() || i.State == saga.StateNeedsHuman) {
			return i.State
		}
	}
	return "timeout"
}

// Admin: find sagas stuck in needs_human for over an hour, and cancel one that has
// not reached its pivot.
func ExampleClient_List() {
	ctx := context.Background()
	pool, dropSchema := coordtest.ExamplePostgres()
	defer dropSchema()
	c, err := saga.NewClient(pool, saga.Config{})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if err := c.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	stuck, err := c.List(ctx, &saga.ListOpts{States: []saga.State{saga.StateNeedsHuman}, OlderThan: time.Hour})
	fmt.Println(len(stuck), err)
	err = c.Cancel(ctx, "no-such-saga", "customer cancelled")
	fmt.Println(errors.Is(err, saga.ErrNotFound))
	// Output:
	// 0 <nil>
	// true
}
