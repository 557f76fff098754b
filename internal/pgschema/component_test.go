package pgschema_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coordkit/coordkit/coord"
	"github.com/coordkit/coordkit/internal/pgschema"
	"github.com/coordkit/coordkit/testing/coordtest"
)

// throwaway is a test-only component whose second version is not idempotent: an
// ALTER TABLE ADD COLUMN fails when it runs twice, and each version logs itself.
var throwaway = fstest.MapFS{
	"m/001_create.sql": {Data: []byte(`CREATE TABLE {{table}} (id int PRIMARY KEY);
CREATE TABLE {{log}} (version int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
INSERT INTO {{log}} (version) VALUES (1);`)},
	"m/002_add_note.sql": {Data: []byte(`ALTER TABLE {{table}} ADD COLUMN note text NOT NULL DEFAULT '';
INSERT INTO {{log}} (version) VALUES (2);`)},
}

// testComponent loads the throwaway component with its first n versions.
func testComponent(t *testing.T, schema string, n int) pgschema.Component {
	t.Helper()
	c, err := pgschema.Component{Kind: "testonly", Schema: schema, Name: "things"}.LoadMigrations(throwaway, "m", map[string]string{
		"table": pgschema.Qualified(schema, "things"),
		"log":   pgschema.Qualified(schema, "things_log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Migrations = c.Migrations[:n]
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// migrateAll runs c.Migrate from n connections released at once and returns the
// errors that came back.
func migrateAll(ctx context.Context, t *testing.T, url string, c pgschema.Component, n int) []error {
	t.Helper()
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		conns[i] = conn
	}
	start := make(chan struct{})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, conn := range conns {
		wg.Go(func() {
			<-start
			if err := c.Migrate(ctx, conn); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	close(start)
	coordtest.Wait(t, &wg, 60*time.Second, "the concurrent migrations")
	return errs
}

// TestSecondVersionAppliedOnceUnderConcurrency: a schema at version 1 is upgraded
// to version 2 by 8 processes at once, 20 times over; every call succeeds and each
// version ran exactly once (its log row, its version row).
func TestSecondVersionAppliedOnceUnderConcurrency(t *testing.T) {
	const callers, trials = 8, 20
	for trial := range trials {
		t.Run("", func(t *testing.T) { upgradeOnce(t, trial, callers) })
	}
}

func upgradeOnce(t *testing.T, trial, callers int) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	// Half the trials start from an empty schema, half from version 1.
	if trial%2 == 1 {
		if errs := migrateAll(ctx, t, db.URL, testComponent(t, "", 1), callers); len(errs) > 0 {
			t.Fatalf("trial %d: %d of %d concurrent v1 migrations failed: %v", trial, len(errs), callers, errs[0])
		}
	}
	c := testComponent(t, db.Schema, 2)
	if errs := migrateAll(ctx, t, db.URL, c, callers); len(errs) > 0 {
		t.Fatalf("trial %d: %d of %d concurrent v2 migrations failed: %v", trial, len(errs), callers, errs[0])
	}
	rows, _ := db.Pool.Query(ctx, "SELECT version FROM things_log ORDER BY at")
	runs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Fatalf("trial %d: migration runs = %v, want [1 2] (each version exactly once)", trial, runs)
	}
	var recorded int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM coordkit_migrations WHERE component = 'testonly' AND name = 'things'").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Applied(ctx, db.Pool); err != nil || v != 2 || recorded != 2 {
		t.Fatalf("trial %d: Applied = %d, %v with %d version rows; want 2, nil, 2", trial, v, err, recorded)
	}
}

// TestOlderCodeLeavesNewerSchema: a process that knows only version 1 starting
// against a schema at version 2 (a rolling deploy) changes nothing and succeeds.
func TestOlderCodeLeavesNewerSchema(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	if err := testComponent(t, "", 2).Migrate(ctx, db.Pool); err != nil {
		t.Fatal(err)
	}
	old := testComponent(t, "", 1)
	if err := old.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("v1 code on a v2 schema: %v", err)
	}
	if v, err := old.Applied(ctx, db.Pool); err != nil || v != 2 {
		t.Fatalf("Applied = %d, %v; want 2", v, err)
	}
}

// TestSQLMatchesMigrate: applying SQL() by hand (as goose, golang-migrate or atlas
// would) records the same versions, so a later Migrate has nothing to do.
func TestSQLMatchesMigrate(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	c := testComponent(t, db.Schema, 2)
	if v, err := c.Applied(ctx, db.Pool); err != nil || v != 0 {
		t.Fatalf("Applied before any migration = %d, %v; want 0 (no version table yet)", v, err)
	}
	for i, s := range c.SQL() {
		if _, err := db.Pool.Exec(ctx, s); err != nil {
			t.Fatalf("SQL()[%d]: %v\n%s", i, err, s)
		}
	}
	if err := c.Migrate(ctx, db.Pool); err != nil {
		t.Fatalf("Migrate after SQL(): %v", err)
	}
	var runs int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM things_log").Scan(&runs); err != nil || runs != 2 {
		t.Fatalf("migration runs = %d, %v; want 2", runs, err)
	}
}

// TestMigrateTxNeedsReadCommitted: under REPEATABLE READ the snapshot could predate
// the previous lock holder's commit, so MigrateTx refuses before changing anything.
func TestMigrateTxNeedsReadCommitted(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	tx, err := db.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	err = testComponent(t, "", 1).MigrateTx(ctx, tx)
	if err == nil || !strings.Contains(err.Error(), "read committed") {
		t.Fatalf("MigrateTx under repeatable read = %v, want a refusal naming read committed", err)
	}
}

// TestMigrateRefusesForeignTable: a table of the same name that this component did
// not create (another component's, the application's) and that is not version 1's
// shape is refused with a *coord.SchemaMismatchError naming the differences, and
// nothing is changed.
func TestMigrateRefusesForeignTable(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	if _, err := db.Pool.Exec(ctx, "CREATE TABLE things (x text)"); err != nil {
		t.Fatal(err)
	}
	err := testComponent(t, "", 1).Migrate(ctx, db.Pool)
	var mm *coord.SchemaMismatchError
	if !errors.As(err, &mm) || !errors.Is(err, coord.ErrSchemaMismatch) {
		t.Fatalf("Migrate over a foreign table = %v, want a *coord.SchemaMismatchError", err)
	}
	for _, want := range []string{`table "things" lacks column id integer NOT NULL`, `table "things" has column x text, which version 1 does not`, `table "things_log" is missing`} {
		if !slices.Contains(mm.Differences, want) {
			t.Errorf("differences %q lack %q", mm.Differences, want)
		}
	}
	var n int
	if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE (schemaname = current_schema() AND tablename IN ('things_log', 'coordkit_migrations')) OR schemaname LIKE 'coordkit_adopt_%'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("after the refusal %d tables of the migration exist (%v), want 0", n, err)
	}
}

// TestMigrateAdoptsVersionOneCreatedWithoutRecord: tables created with version 1's
// SQL but no version recorded (coordkit before versioned migrations) are adopted —
// version 1 recorded, their rows kept, version 2 applied — in the search_path's
// schema and in a named one, with the indexes under other names (as older releases
// named them). Before adoption this failed with 42P07.
func TestMigrateAdoptsVersionOneCreatedWithoutRecord(t *testing.T) {
	db := coordtest.Postgres(t)
	ctx := testCtx(t)
	for _, schema := range []string{"", db.Schema + "_named"} {
		if schema != "" {
			if _, err := db.Pool.Exec(ctx, "CREATE SCHEMA "+pgschema.Quoted(schema)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Pool.Exec(context.Background(), "DROP SCHEMA "+pgschema.Quoted(schema)+" CASCADE") })
		}
		q := func(name string) string { return pgschema.Qualified(schema, name) }
		legacy := "CREATE TABLE IF NOT EXISTS " + q("things") + " (id int PRIMARY KEY);" +
			"CREATE TABLE IF NOT EXISTS " + q("things_log") + " (version int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());" +
			"INSERT INTO " + q("things") + " VALUES (7)"
		if _, err := db.Pool.Exec(ctx, legacy); err != nil {
			t.Fatal(err)
		}
		c := testComponent(t, schema, 2)
		if err := c.Migrate(ctx, db.Pool); err != nil {
			t.Fatalf("schema %q: Migrate over version 1's tables without a record = %v, want them adopted", schema, err)
		}
		var versions []int32
		rows, err := db.Pool.Query(ctx, "SELECT version FROM "+q("coordkit_migrations")+" WHERE component = 'testonly' ORDER BY version")
		if err == nil {
			versions, err = pgx.CollectRows(rows, pgx.RowTo[int32])
		}
		if err != nil || !slices.Equal(versions, []int32{1, 2}) {
			t.Fatalf("schema %q: recorded versions %v (%v), want [1 2]", schema, versions, err)
		}
		var id int
		var note string
		if err := db.Pool.QueryRow(ctx, "SELECT id, note FROM "+q("things")).Scan(&id, &note); err != nil || id != 7 {
			t.Fatalf("schema %q: the adopted table's row: %d %q %v", schema, id, note, err)
		}
		var logged int
		if err := db.Pool.QueryRow(ctx, "SELECT count(*) FROM "+q("things_log")+" WHERE version = 1").Scan(&logged); err != nil || logged != 0 {
			t.Fatalf("schema %q: version 1 ran again on adoption (%d log rows, %v)", schema, logged, err)
		}
	}
}

func TestLoadRejectsMalformedSets(t *testing.T) {
	ok := []byte("CREATE TABLE {{table}} (id int);")
	for name, tc := range map[string]struct {
		fs   fstest.MapFS
		vars map[string]string
	}{
		"gap":           {fstest.MapFS{"m/001_a.sql": {Data: ok}, "m/003_c.sql": {Data: ok}}, map[string]string{"table": "t"}},
		"stray file":    {fstest.MapFS{"m/001_a.sql": {Data: ok}, "m/notes.txt": {Data: ok}}, map[string]string{"table": "t"}},
		"missing value": {fstest.MapFS{"m/001_a.sql": {Data: ok}}, nil},
		"unused value":  {fstest.MapFS{"m/001_a.sql": {Data: ok}}, map[string]string{"table": "t", "other": "o"}},
		"empty":         {fstest.MapFS{"m/.keep": {}}, nil},
	} {
		if _, err := pgschema.Load(tc.fs, "m", tc.vars); err == nil {
			t.Errorf("%s: Load accepted it", name)
		}
		c := pgschema.Component{Owner: "testonly", Kind: "testonly", Name: "things"}
		if _, err := c.LoadMigrations(tc.fs, "m", tc.vars); err == nil || !strings.HasPrefix(err.Error(), "testonly: migrations m: ") {
			t.Errorf("%s: LoadMigrations returned %v, want the Load error prefixed with the owner", name, err)
		}
	}
}
