package coordtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPostgresURL is used when COORD_TEST_POSTGRES_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// PostgresDB is an isolated schema on a real PostgreSQL server.
type PostgresDB struct {
	// Pool is a pool whose connections use Schema as their search_path.
	Pool *pgxpool.Pool
	// URL connects to the same database with search_path=Schema, for child processes.
	URL string
	// Schema is the test's own schema, dropped (CASCADE) when the test ends.
	Schema string
}

// Postgres returns a fresh schema on the server at COORD_TEST_POSTGRES_URL (or the
// local server), with a pool confined to it, so tests can run in parallel and leave
// nothing behind. It fails the test, with a hint, when the server is unreachable.
func Postgres(t testing.TB) *PostgresDB {
	t.Helper()
	return PostgresAt(t, envOr("COORD_TEST_POSTGRES_URL", DefaultPostgresURL))
}

// PostgresAt is Postgres against the server at baseURL.
func PostgresAt(t testing.TB, baseURL string) *PostgresDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, baseURL)
	if err != nil {
		unreachable(t, "PostgreSQL", redactURL(baseURL), err)
	}
	defer admin.Close(context.Background())
	schema := "coordtest_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("coordtest: create schema: %v", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatalf("coordtest: postgres URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db := &PostgresDB{URL: u.String(), Schema: schema}
	db.Pool, err = pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatalf("coordtest: postgres pool: %v", err)
	}
	t.Cleanup(func() {
		db.Pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, baseURL)
		if err != nil {
			t.Logf("coordtest: drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Logf("coordtest: drop schema %s: %v", schema, err)
		}
	})
	return db
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// redactURL hides the password of a connection URL, for messages.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// String describes the database without credentials.
func (db *PostgresDB) String() string {
	return fmt.Sprintf("schema %s at %s", db.Schema, redactURL(db.URL))
}
