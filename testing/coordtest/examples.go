package coordtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The servers of Example functions, which have no *testing.T: each helper
// returns what the example uses and a function that releases it, and panics,
// saying which server, when it cannot (the example then fails with the panic
// instead of a wrong // Output:). The servers are the tests' ones
// (COORD_TEST_* or the local defaults; scripts/services.sh starts them).

// ExamplePostgres returns a pool on a fresh schema of the server at
// COORD_TEST_POSTGRES_URL (or the local server) and a function that drops the
// schema and closes the pool.
func ExamplePostgres() (*pgxpool.Pool, func()) {
	base := envOr("COORD_TEST_POSTGRES_URL", DefaultPostgresURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		panic(fmt.Sprintf("coordtest: example PostgreSQL at %s: %v", redactURL(base), err))
	}
	schema := "example_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		panic(fmt.Sprintf("coordtest: example schema: %v", err))
	}
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("coordtest: postgres URL: %v", err))
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		panic(fmt.Sprintf("coordtest: example pool: %v", err))
	}
	return pool, func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		_ = admin.Close(ctx)
	}
}

// ExampleEtcd starts an embedded etcd in a temporary directory and returns a
// client of it and a function that closes the client, stops the server and
// removes the directory.
func ExampleEtcd() (*clientv3.Client, func()) {
	dir, err := os.MkdirTemp("", "coordtest-example-*")
	if err != nil {
		panic(fmt.Sprintf("coordtest: example etcd dir: %v", err))
	}
	e, err := StartEtcd(dir)
	if err != nil {
		panic(fmt.Sprintf("coordtest: example etcd: %v", err))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		panic(fmt.Sprintf("coordtest: example etcd client: %v", err))
	}
	return cli, func() { cli.Close(); e.Close(); os.RemoveAll(dir) }
}

// ExampleRedis returns a client of the server at COORD_TEST_REDIS_URL (or the
// local server) and a function that closes it.
func ExampleRedis() (*redis.Client, func()) {
	raw := envOr("COORD_TEST_REDIS_URL", DefaultRedisURL)
	opt, err := redis.ParseURL(raw)
	if err != nil {
		panic(fmt.Sprintf("coordtest: redis URL: %v", err))
	}
	c := redis.NewClient(opt)
	return c, func() { c.Close() }
}

// ExampleNATSURL returns the URL of the NATS server (COORD_TEST_NATS_URL, or
// the local server).
func ExampleNATSURL() string { return envOr("COORD_TEST_NATS_URL", DefaultNATSURL) }
