package coordtest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisURL is used when COORD_TEST_REDIS_URL is not set.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// RedisDB is a real Redis server seen through a per-test namespace.
type RedisDB struct {
	Client *redis.Client
	// Tenant is a tenant name unique to the test; keys under /tenants/{Tenant}/ are
	// deleted when the test ends.
	Tenant string
	// Prefix is a key prefix unique to the test ("coordtest:<hex>:"); keys under it
	// are deleted when the test ends.
	Prefix string
}

// Redis returns a client of the server at COORD_TEST_REDIS_URL (or the local
// server) and a tenant and key prefix unique to the test, so tests can run in
// parallel and leave nothing behind. It fails the test, with a hint, when the
// server is unreachable.
func Redis(t testing.TB) *RedisDB {
	t.Helper()
	raw := envOr("COORD_TEST_REDIS_URL", DefaultRedisURL)
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatalf("coordtest: redis URL: %v", err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		unreachable(t, "Redis", redactURL(raw), err)
	}
	id := randomHex(6)
	db := &RedisDB{Client: c, Tenant: "t" + id, Prefix: "coordtest:" + id + ":"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, pattern := range []string{db.Prefix + "*", "/tenants/" + db.Tenant + "/*"} {
			iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		}
		c.Close()
	})
	return db
}
