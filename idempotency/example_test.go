package idempotency_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/idempotency"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A payment endpoint: the charge row and the idempotency key commit together; a
// retry with the same key replays the stored response without charging again.
func ExampleStore_Do() {
	pool, cleanup := coordtest.ExamplePostgres()
	defer cleanup()
	ctx := context.Background()
	store, err := idempotency.New(pool, idempotency.Config{})
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	pool.Exec(ctx, `CREATE TABLE charges (id serial PRIMARY KEY, amount int)`)

	key := idempotency.Key{Scope: "tenant-acme", ID: "8e03978e-40d5-43e8-bc93-6894a57f9324"}
	fp, _ := idempotency.FingerprintJSON("POST", "/charges", []byte(`{"amount": 100}`))
	charge := func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		var id int
		if err := tx.QueryRow(ctx, `INSERT INTO charges (amount) VALUES (100) RETURNING id`).Scan(&id); err != nil {
			return idempotency.Response{}, err
		}
		return idempotency.Response{Status: 201, Body: fmt.Appendf(nil, `{"charge":%d}`, id)}, nil
	}
	for range 2 {
		res, err := store.Do(ctx, key, fp, charge, nil)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Response.Status, string(res.Response.Body), "replayed:", res.Replayed)
	}
	// Same key, different request: refused.
	other, _ := idempotency.FingerprintJSON("POST", "/charges", []byte(`{"amount": 200}`))
	_, err = store.Do(ctx, key, other, charge, nil)
	fmt.Println(err)
	// Output:
	// 201 {"charge":1} replayed: false
	// 201 {"charge":1} replayed: true
	// idempotency: key "tenant-acme"/"8e03978e-40d5-43e8-bc93-6894a57f9324" was used with a different request
}

// DoTx joins the caller's transaction: the key is stored only if the caller commits.
func ExampleStore_DoTx() {
	pool, cleanup := coordtest.ExamplePostgres()
	defer cleanup()
	ctx := context.Background()
	store, _ := idempotency.New(pool, idempotency.Config{})
	if err := store.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	key := idempotency.Key{Scope: "tenant-acme", ID: "order-42"}
	fp := idempotency.FingerprintOf([]byte("create order 42"))
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	res, err := store.DoTx(ctx, tx, key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
		// ... write the order with tx ...
		return idempotency.Response{Status: 201, Body: []byte("created")}, nil
	}, nil)
	if err != nil {
		panic(err) // the caller rolls tx back
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
	fmt.Println(res.Response.Status, string(res.Response.Body), res.Replayed)
	// Output: 201 created false
}

// A phased payment: the local order, the provider call (made with the idempotency
// key), and the final record are separate recovery points. A crash between them is
// finished by a retry after the lock expires, or by the Completer.
func ExampleStore_Run() {
	pool, cleanup := coordtest.ExamplePostgres()
	defer cleanup()
	ctx := context.Background()
	store, _ := idempotency.New(pool, idempotency.Config{})
	if err := store.Migrate(ctx, pool); err != nil {
		panic(err)
	}
	providerCharge := func(ctx context.Context, idempotencyKey string, amount []byte) (string, error) {
		return "ch_123", nil // a real PSP client sends Idempotency-Key: idempotencyKey
	}
	op := &idempotency.Operation{Name: "payment", Phases: []idempotency.Phase{
		{Name: "order_created", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			return nil // INSERT the order with tx
		}},
		{Name: "charged", External: func(ctx context.Context, st *idempotency.State) error {
			id, err := providerCharge(ctx, st.Key.ID, st.Request)
			st.Data = []byte(id) // recorded with the recovery point
			return err
		}},
		{Name: "finished", Tx: func(ctx context.Context, tx pgx.Tx, st *idempotency.State) error {
			st.Response = &idempotency.Response{Status: 201, Body: st.Data}
			return nil
		}},
	}}
	// Run the completer in the background of every replica:
	//   c, _ := store.NewCompleter(idempotency.CompleterConfig{}, op); go c.Run(ctx)
	key := idempotency.Key{Scope: "tenant-acme", ID: "pay-7"}
	res, err := store.Run(ctx, key, idempotency.FingerprintOf([]byte("pay 100")), op, []byte("100"))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Response.Status, string(res.Response.Body))
	// Output: 201 ch_123
}
