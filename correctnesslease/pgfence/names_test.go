package pgfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/correctnesslease/pgfence"
	"github.com/coordkit/coordkit/testing/coordtest"
)

func TestInvalidNamesAreRefused(t *testing.T) {
	for _, cfg := range []pgfence.Config{
		{Table: strings.Repeat("t", 64)},
		{Table: "bad\xffutf8"},
		{Table: "nul\x00byte"},
		{Table: "new\nline"},
		{Table: "app.fences"}, // a schema goes in Schema
		{Schema: "tab\tschema"},
	} {
		_, err := pgfence.New(cfg)
		var ce *pgfence.ConfigError
		field := "Table"
		if cfg.Schema != "" {
			field = "Schema"
		}
		if !errors.Is(err, pgfence.ErrInvalidConfig) || !errors.As(err, &ce) || ce.Field != field || !coordtest.IsInvalidName(err, field) {
			t.Errorf("New(%+q) = %v, want a *ConfigError for %s wrapping a *coord.NameError", cfg.Table+"|"+cfg.Schema, err, field)
		}
	}
	// The audit table's derived name must fit too; other fields are checked.
	for field, cfg := range map[string]pgfence.Config{
		"Table":          {Table: strings.Repeat("t", 58)},
		"LeaseTTL":       {LeaseTTL: -time.Second},
		"MaxLeaseLabels": {MaxLeaseLabels: -1},
	} {
		var ce *pgfence.ConfigError
		if _, err := pgfence.New(cfg); !errors.As(err, &ce) || ce.Field != field {
			t.Errorf("New(%+v) = %v, want a *pgfence.ConfigError for %s", cfg, err, field)
		}
	}
	if _, err := pgfence.New(pgfence.Config{Table: strings.Repeat("t", 57)}); err != nil {
		t.Errorf("New with a 57-byte table name: %v", err)
	}
	f, err := pgfence.New(pgfence.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []pgfence.RowSpec{
		{Table: "", Set: []string{"a"}, Key: []string{"id"}},
		{Table: "t", Set: []string{"a\x00"}, Key: []string{"id"}},
		{Table: "t", Set: []string{"a"}, Key: []string{strings.Repeat("k", 64)}},
		{Table: "t", Set: []string{"a"}, Key: []string{"id"}, FenceColumn: "\x7f"},
	} {
		if _, err := f.RowUpdater(spec); !errors.Is(err, coord.ErrInvalidName) {
			t.Errorf("RowUpdater(%+q) = %v, want ErrInvalidName", spec, err)
		}
	}
	for _, spec := range []pgfence.RowSpec{
		{Table: "t", Key: []string{"id"}},
		{Table: "t", Set: []string{"a"}},
		{Table: "t", Set: []string{"fence"}, Key: []string{"id"}},
		{Table: "t", Set: []string{"a", "a"}, Key: []string{"id"}},
		{Table: "t", Set: []string{"a"}, Key: []string{"fence"}},
	} {
		if _, err := f.RowUpdater(spec); err == nil {
			t.Errorf("RowUpdater(%+q) accepted a malformed spec", spec)
		}
	}
}

// A hostile table name is quoted, never interpreted: the fence table is created with
// that literal name and the table the name tries to drop survives.
func TestHostileTableNameIsQuoted(t *testing.T) {
	const hostile = `x"; DROP TABLE y; --`
	f, db, _ := newFence(t, pgfence.Config{Table: hostile})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE y (id int)"); err != nil {
		t.Fatal(err)
	}
	// Migrate again (idempotent), guard, read: every statement touches the name.
	if err := f.Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	if err := guard(ctx, f, db.Pool, tok(t, "/h@3")); err != nil {
		t.Fatal(err)
	}
	if err := guard(ctx, f, db.Pool, tok(t, "/h@2")); !errors.Is(err, coord.ErrStaleToken) {
		t.Fatalf("stale guard on hostile-named table = %v", err)
	}
	var tables []string
	rows, _ := db.Pool.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", db.Schema)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 4 || tables[0] != "coordkit_migrations" || tables[1] != hostile || tables[2] != hostile+"_audit" || tables[3] != "y" {
		t.Fatalf("tables = %q, want coordkit_migrations, the literal hostile name, its audit table and y", tables)
	}
	if _, err := f.FenceReset(ctx, db.Pool, "/h", pgfence.ResetOpts{Actor: `o"; --`, Reason: "x'); DROP TABLE y; --", ExpectHighest: 3}); err != nil {
		t.Fatalf("reset on the hostile-named table: %v", err)
	}
	if sql := strings.Join(f.MigrationSQL(), "\n"); !strings.Contains(sql, `"x""; DROP TABLE y; --"`) {
		t.Fatalf("migration does not quote the name:\n%s", sql)
	}
	u, err := f.RowUpdater(pgfence.RowSpec{Table: hostile, Set: []string{`a"b`}, Key: []string{"id; --"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `UPDATE "x""; DROP TABLE y; --" SET "a""b" = $1, "fence" = $3 WHERE "id; --" = $2 AND "fence" <= $3`
	if u.SQL() != want {
		t.Fatalf("SQL = %s\nwant  %s", u.SQL(), want)
	}
}

func TestMigrateConcurrentlyAndInSchema(t *testing.T) {
	f, db, _ := newFence(t, pgfence.Config{})
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, `CREATE SCHEMA "Other Schema"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Pool.Exec(testCtx(t), `DROP SCHEMA "Other Schema" CASCADE`) })
	g, err := pgfence.New(pgfence.Config{Schema: "Other Schema", Table: "Fences"})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 6)
	for range 3 {
		go func() { errs <- f.Migrate(ctx, db.Pool) }()
		go func() { errs <- g.Migrate(ctx, db.Pool) }()
	}
	for range 6 {
		if err := coordtest.Recv(t, errs, 60*time.Second, "a concurrent Migrate returning"); err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
	if err := guard(ctx, g, db.Pool, tok(t, "/s@1")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM "Other Schema"."Fences"`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows in the schema-qualified fence table = %d, %v; want 1", n, err)
	}
}

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
