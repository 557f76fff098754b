package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A holder's writes go through Exec with its token; an older holder's are refused.
// In production the token comes from correctnesslease (Lease.Token) or from the
// Coord-Fencing-Token header of the request (coord.ParseToken).
func ExampleFence_Exec() {
	ctx := context.Background()
	pool, done := coordtest.ExamplePostgres()
	defer done()

	fence, err := pgfence.New(pgfence.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := fence.Migrate(ctx, pool); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE ledger (entry text)"); err != nil {
		log.Fatal(err)
	}
	charge := func(tok coord.Token) error {
		return fence.Exec(ctx, pool, tok, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1)", "charge by "+tok.String())
			return err
		})
	}
	paused, _ := coord.ParseToken("/tenants/acme/elections/billing@41")
	successor, _ := coord.ParseToken("/tenants/acme/elections/billing@57")

	fmt.Println("successor:", charge(successor))
	err = charge(paused) // the old holder wakes up from its pause
	fmt.Println("paused holder stale:", errors.Is(err, coord.ErrStaleToken))
	fmt.Println(err)
	// Output:
	// successor: <nil>
	// paused holder stale: true
	// coord: stale fencing token /tenants/acme/elections/billing@41: resource has seen /tenants/acme/elections/billing@57
}

// The per-row form: one UPDATE, no fence table.
func ExampleRowUpdater_Update() {
	ctx := context.Background()
	pool, done := coordtest.ExamplePostgres()
	defer done()

	fence, err := pgfence.New(pgfence.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance bigint,
		fence bigint NOT NULL DEFAULT 0); INSERT INTO accounts VALUES (1, 0, 0)`); err != nil {
		log.Fatal(err)
	}
	setBalance, err := fence.RowUpdater(pgfence.RowSpec{Table: "accounts", Set: []string{"balance"}, Key: []string{"id"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(setBalance.SQL())
	newer, _ := coord.ParseToken("/tenants/acme/elections/billing@57")
	older, _ := coord.ParseToken("/tenants/acme/elections/billing@41")
	n, err := setBalance.Update(ctx, pool, newer, []any{1}, 100)
	fmt.Println(n, err)
	_, err = setBalance.Update(ctx, pool, older, []any{1}, 999)
	fmt.Println(errors.Is(err, coord.ErrStaleToken))
	_, err = setBalance.Update(ctx, pool, newer, []any{2}, 5)
	fmt.Println(errors.Is(err, pgfence.ErrRowNotFound))
	// Output:
	// UPDATE "accounts" SET "balance" = $1, "fence" = $3 WHERE "id" = $2 AND "fence" <= $3
	// 1 <nil>
	// true
	// true
}
