package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/outbox"
)

// runOrder: orders are placed with their event written to the outbox in the same
// transaction; one order is rolled back (its event never exists); a poison payload
// is refused at write time; the relay publishes after commit; the broker delivers
// every event twice (at-least-once) and the shipping consumer's inbox applies each
// once.
func runOrder(ctx context.Context, e *env) (string, bool) {
	ob, err := outbox.New(outbox.Config{Table: "order_outbox"})
	if err != nil {
		return err.Error(), false
	}
	inbox, err := outbox.NewInbox(outbox.InboxConfig{Table: "shipping_inbox"})
	if err != nil {
		return err.Error(), false
	}
	for _, m := range []func() error{
		func() error { return ob.Migrate(ctx, e.pool) },
		func() error { return inbox.Migrate(ctx, e.pool) },
		func() error {
			_, err := e.pool.Exec(ctx, `CREATE TABLE orders (id text PRIMARY KEY, written_at timestamptz NOT NULL DEFAULT clock_timestamp());
				CREATE TABLE shipments (order_id text NOT NULL, event_id text NOT NULL)`)
			return err
		},
	} {
		if err := m(); err != nil {
			return "setup: " + err.Error(), false
		}
	}

	// The broker: records what was published and delivers each message twice.
	var mu sync.Mutex
	published := map[string]time.Time{} // order id → publish time
	deliveries := make(chan outbox.Message, 64)
	relay, err := ob.NewRelay(e.pool, outbox.PublisherFunc(func(ctx context.Context, m outbox.Message) error {
		mu.Lock()
		published[m.Key] = time.Now()
		mu.Unlock()
		deliveries <- m
		deliveries <- m // at-least-once: a redelivery
		return nil
	}))
	if err != nil {
		return err.Error(), false
	}
	rctx, stopRelay := context.WithCancel(ctx)
	relayDone := make(chan error, 1)
	go func() { relayDone <- relay.Run(rctx) }()
	defer func() { stopRelay(); <-relayDone }()

	place := func(id string, commit bool, payload []byte) error {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id); err != nil {
			return err
		}
		if _, err := ob.EnqueueTx(ctx, tx, outbox.Event{Topic: "orders", Key: id, Type: "order.placed", Payload: payload, JSON: true}); err != nil {
			return err
		}
		if !commit {
			return nil // payment declined: roll back, order and event together
		}
		return tx.Commit(ctx)
	}
	for _, o := range []struct {
		id     string
		commit bool
	}{{"ord-1", true}, {"ord-2", false}, {"ord-3", true}} {
		if err := place(o.id, o.commit, []byte(fmt.Sprintf(`{"order":%q,"total":4200}`, o.id))); err != nil {
			return err.Error(), false
		}
		if o.commit {
			step("order %s committed with its order.placed event in the same transaction", o.id)
		} else {
			step("order %s rolled back (payment declined): its event rolled back with it", o.id)
		}
	}
	poison := place("ord-4", true, []byte("{\"note\":\"\xff\xfe\"}"))
	poisonRejected := errors.Is(poison, outbox.ErrInvalidEvent)
	step("order ord-4 with invalid UTF-8 in its event → refused at write time: %v", poison)

	// The shipping service consumes through its inbox.
	applied, duplicates := 0, 0
	deadline := time.After(15 * time.Second)
	for applied+duplicates < 4 {
		var m outbox.Message
		select {
		case m = <-deliveries:
		case <-deadline:
			return fmt.Sprintf("only %d deliveries arrived", applied+duplicates), false
		}
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			ran, err := inbox.ProcessTx(ctx, tx, "shipping", m.ID.String(), func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO shipments (order_id, event_id) VALUES ($1, $2)`, m.Key, m.ID.String())
				return err
			})
			if ran {
				applied++
			} else if err == nil {
				duplicates++
			}
			return err
		})
		if err != nil {
			return "consume: " + err.Error(), false
		}
	}
	var shipments, rolledBackEvents int
	e.pool.QueryRow(ctx, `SELECT count(*) FROM shipments`).Scan(&shipments)
	e.pool.QueryRow(ctx, `SELECT count(*) FROM order_outbox WHERE aggregateid IN ('ord-2', 'ord-4')`).Scan(&rolledBackEvents)
	var lags []string
	afterCommit := true
	for _, id := range []string{"ord-1", "ord-3"} {
		var committed time.Time
		e.pool.QueryRow(ctx, `SELECT written_at FROM orders WHERE id = $1`, id).Scan(&committed)
		mu.Lock()
		at, ok := published[id]
		mu.Unlock()
		afterCommit = afterCommit && ok && at.After(committed)
		lags = append(lags, fmt.Sprintf("%s +%dms", id, at.Sub(committed).Milliseconds()))
	}
	step("published by the relay after commit (ms after the order row was written): %v; 4 deliveries to shipping, %d applied, %d skipped by the inbox", lags, applied, duplicates)
	mu.Lock()
	_, ord2 := published["ord-2"]
	nPublished := len(published)
	mu.Unlock()
	verdict := fmt.Sprintf("%d events published for 2 committed orders, %d for the rolled-back one; %d shipments from 4 deliveries (%d duplicates skipped); poison refused at write: %v",
		nPublished, btoi(ord2), shipments, duplicates, poisonRejected)
	return verdict, nPublished == 2 && !ord2 && rolledBackEvents == 0 && afterCommit && shipments == 2 && duplicates == 2 && poisonRejected
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
