package pgfence_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestPackageLevelFunctionsUseTheDefaultTable(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	if err := pgfence.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if err := pgfence.Exec(ctx, db.Pool, tok(t, "/d@4"), func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := pgfence.GuardTx(ctx, tx, tok(t, "/d@3")); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("GuardTx(/d@3) after /d@4 = %v, want stale", err)
	}
	var rev int64
	if err := db.Pool.QueryRow(ctx, `SELECT revision FROM "coord_fences" WHERE lease = '/d'`).Scan(&rev); err != nil || rev != 4 {
		t.Fatalf("default table holds %d, %v; want 4", rev, err)
	}
}
