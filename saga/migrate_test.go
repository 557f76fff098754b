package saga

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// A saga table and a barrier table of the same name used to "migrate" without an
// error (CREATE TABLE IF NOT EXISTS found the other one) and fail at first use.
// Now the second Migrate is refused, whichever comes first: the table is not the
// second component's version 1, so it is not adopted.
func TestSagaAndBarrierCannotShareATable(t *testing.T) {
	for _, sagaFirst := range []bool{true, false} {
		db := coordtest.Postgres(t)
		ctx := context.Background()
		c, err := NewClient(db.Pool, Config{Table: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, err := NewBarrier(BarrierConfig{Table: "shared"})
		if err != nil {
			t.Fatal(err)
		}
		first, second := c.Migrate, b.Migrate
		if !sagaFirst {
			first, second = b.Migrate, c.Migrate
		}
		if err := first(ctx, db.Pool); err != nil {
			t.Fatal(err)
		}
		err = second(ctx, db.Pool)
		if !errors.Is(err, coord.ErrSchemaMismatch) || !strings.Contains(err.Error(), `table "shared"`) {
			t.Fatalf("saga first %v: second Migrate on the same table = %v, want it refused (a *coord.SchemaMismatchError naming the table)", sagaFirst, err)
		}
	}
}

// With Schema set, every table, index and statement is schema-qualified; the
// connection's search_path does not matter.
func TestSchemaQualifiedTables(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	const schema = "Saga Schema"
	if _, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	cfg := fastConfig()
	cfg.Schema, cfg.Table = schema, "Orders"
	c, err := NewClient(db.Pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := NewBarrier(BarrierConfig{Schema: schema, Table: "Barrier"})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []func(context.Context, Beginner) error{c.Migrate, b.Migrate} {
		if err := m(ctx, db.Pool); err != nil {
			t.Fatal(err)
		}
	}
	var tables []string
	rows, _ := db.Pool.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1", schema)
	tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || strings.Join(tables, ",") != "Barrier,Orders,coordkit_migrations" {
		t.Fatalf("tables in %q = %q, %v", schema, tables, err)
	}
	e := &env{db: db, p: newParticipant(t, db.Pool)}
	c2, def := e.client(t, cfg)
	run(t, c2)
	id := start(t, ctx, c2, def, order{}, nil)
	waitState(t, c2, id, 30*time.Second, StateCompleted)
}

// The deprecated package-level Migrate (kept for programs written before
// Client.Migrate) still creates both tables, records their versions, and refuses
// a dotted table name with what to write instead.
func TestDeprecatedMigrate(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := context.Background()
	if err := Migrate(ctx, db.Pool, &MigrateOpts{Table: "old_sagas", BarrierTable: "old_barrier"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM coordkit_migrations WHERE name IN ('old_sagas', 'old_barrier') AND version = 1").Scan(&n); err != nil || n != 2 {
		t.Fatalf("version 1 recorded for %d of the two tables (%v)", n, err)
	}
	c, err := NewClient(db.Pool, Config{Table: "old_sagas"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if applied, latest, err := c.SchemaVersion(ctx, db.Pool); err != nil || applied != latest {
		t.Fatalf("after the deprecated Migrate: schema version %d of %d (%v)", applied, latest, err)
	}
	err = Migrate(ctx, db.Pool, &MigrateOpts{Table: "billing.sagas", BarrierTable: "-"})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `write Schema: "billing", Table: "sagas"`) {
		t.Fatalf("Migrate with Table \"billing.sagas\" = %v, want ErrInvalidConfig saying what to write", err)
	}
}
