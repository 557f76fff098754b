package coordkit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// legacySchemas: for each component of components(), its schema file from before
// versioned migrations (testdata/legacy, from git) and the names that code gave its
// placeholders with the default Config (indexes were named differently then).
var legacySchemas = map[string]struct {
	file  string
	names map[string]string
}{
	"pgfence": {"pgfence.sql", map[string]string{"table": "coord_fences"}},
	"idempotency": {"idempotency.sql", map[string]string{"table": "coord_idempotency_keys",
		"created_idx": "coord_idempotency_keys_created_idx", "abandoned_idx": "coord_idempotency_keys_abandoned_idx"}},
	"outbox": {"outbox.sql", map[string]string{"table": "coord_outbox", "dead": "coord_outbox_parked",
		"idx_pending": "coord_outbox_pending", "idx_key": "coord_outbox_key", "idx_retry": "coord_outbox_retry",
		"idx_published": "coord_outbox_published", "idx_dead_key": "coord_outbox_parked_key"}},
	"inbox": {"inbox.sql", map[string]string{"table": "coord_inbox", "idx_processed": "coord_inbox_processed"}},
	"saga": {"saga.sql", map[string]string{"sagas": "coord_sagas", "due_idx": "coord_sagas_due_idx",
		"state_idx": "coord_sagas_state_idx", "no_compensation_after_pivot": "coord_sagas_no_comp_after_pivot"}},
	"saga barrier": {"saga_barrier.sql", map[string]string{"barrier": "coord_saga_barrier"}},
}

// legacySQL renders a component's pre-versioning schema file as that release did.
func legacySQL(t *testing.T, component string) string {
	t.Helper()
	l, ok := legacySchemas[component]
	if !ok {
		t.Fatalf("no legacy schema for component %q: add it to legacySchemas", component)
	}
	b, err := os.ReadFile("testdata/legacy/" + l.file)
	if err != nil {
		t.Fatal(err)
	}
	sql := string(b)
	for k, v := range l.names {
		sql = strings.ReplaceAll(sql, "{{"+k+"}}", pgx.Identifier{v}.Sanitize())
	}
	if strings.Contains(sql, "{{") {
		t.Fatalf("%s: a placeholder is left: %s", l.file, sql)
	}
	return sql
}

// TestMigrateAdoptsTablesOfUnversionedReleases: a database made by the schema SQL
// coordkit shipped before versioned migrations (CREATE TABLE IF NOT EXISTS, nothing
// recorded) is upgraded by today's Migrate of every component: version 1 adopted
// (recorded, the rows kept), later versions applied, a second Migrate a no-op.
// Before adoption every component failed with SQLSTATE 42P07 until the user
// recorded version 1 by hand. A table that is not version 1's shape (a column
// dropped) is refused with a *coord.SchemaMismatchError naming it.
func TestMigrateAdoptsTablesOfUnversionedReleases(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	use := func(schema string) {
		t.Helper()
		q := pgx.Identifier{schema}.Sanitize()
		if _, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+q); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Pool.Exec(context.Background(), "DROP SCHEMA "+q+" CASCADE") })
		if _, err := conn.Exec(ctx, "SET search_path TO "+q); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range components(t, db.Pool) {
		if _, ok := legacySchemas[c.name]; !ok {
			continue // born versioned (schedule): no release created its tables unrecorded
		}
		t.Run(c.name, func(t *testing.T) {
			use(fmt.Sprintf("%s_legacy%d", db.Schema, i))
			sql := legacySQL(t, c.name)
			main := strings.Fields(sql[strings.Index(sql, "CREATE TABLE IF NOT EXISTS"):])[5] // the first table's name
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("the legacy schema: %v", err)
			}
			if err := c.migrate(ctx, conn); err != nil {
				t.Fatalf("Migrate over the tables of an unversioned release: %v", err)
			}
			var v1, latest int
			if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE version = 1), max(version) FROM coordkit_migrations").Scan(&v1, &latest); err != nil || v1 != 1 {
				t.Fatalf("coordkit_migrations after adoption: version 1 recorded %d times, latest %d (%v)", v1, latest, err)
			}
			if err := c.migrate(ctx, conn); err != nil {
				t.Fatalf("a second Migrate: %v", err)
			}
			var rows int
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM coordkit_migrations").Scan(&rows); err != nil || rows != latest {
				t.Fatalf("after a second Migrate %d versions recorded (%v), want %d", rows, err, latest)
			}
			if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+main).Scan(&rows); err != nil {
				t.Fatalf("the adopted table %s: %v", main, err)
			}
		})
	}
	t.Run("a table unlike version 1", func(t *testing.T) {
		use(db.Schema + "_legacy_mismatch")
		if _, err := conn.Exec(ctx, legacySQL(t, "outbox")+"; ALTER TABLE coord_outbox DROP COLUMN last_error"); err != nil {
			t.Fatal(err)
		}
		var outboxMigrate func(context.Context, *pgx.Conn) error
		for _, c := range components(t, db.Pool) {
			if c.name == "outbox" {
				outboxMigrate = c.migrate
			}
		}
		err := outboxMigrate(ctx, conn)
		var mm *coord.SchemaMismatchError
		if !errors.As(err, &mm) || !errors.Is(err, coord.ErrSchemaMismatch) || !strings.Contains(err.Error(), `lacks column last_error text`) {
			t.Fatalf("Migrate over an outbox without last_error = %v, want a *coord.SchemaMismatchError naming the column", err)
		}
		if coord.Retryable(err) {
			t.Error("a schema mismatch is retryable")
		}
	})
}
